/*
 * nova-rdt-pktgen: the send fast path of nova-rdt's software RFC 2544
 * generator.  The Python worker (swworker.py) stays the control plane:
 * it reads the interface counters, sends and times the latency probes,
 * and runs this for the bulk traffic of one trial.
 *
 *   nova-rdt-pktgen --tx IF[,IF2] --rate PPS --duration S --size BYTES
 *                   [--flows N] [--dst-mac MAC[,MAC2]] [--batch N]
 *
 * With two interfaces both directions run at once, each at half the
 * rate.  Frames are IPv4/UDP; flow i varies the source MAC, the source
 * and destination IP and the UDP ports (and the destination MAC unless
 * --dst-mac fixes it), so a switch's exact-match and megaflow caches see
 * real flow churn.
 *
 * Fast path: a PACKET_MMAP TX ring (TPACKET_V2) per interface with
 * PACKET_QDISC_BYPASS; frames are written into ring slots and handed to
 * the kernel in batches with one sendto() each.
 *
 * Rate control: frame n is due at start + n / rate.  The loop sends what
 * is due (at most a batch), then sleeps until the next batch is due, so
 * the offered rate holds at any rate the machine can reach; when it
 * cannot keep up it sends back to back and says so by sending less, and
 * after being kept off the CPU it does not make up for the lost time in
 * one burst.
 *
 * Prints one JSON object: frames handed to each ring, frames the kernel
 * refused, the real elapsed time.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/if.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_IF 2
#define MAX_FLOWS 65536
#define MAX_FRAME 1518
#define FCS 4
#define SLOT 2048
#define SLOTS 1024                 /* per ring */
#define MAX_BATCH 256
/* At most this much owed traffic is made up in one go (see main). */
#define LIMIT_S 1e-3

struct ring {
	const char *name;
	int fd;
	uint8_t *map;
	unsigned head;                 /* next slot to fill */
	unsigned char src[6], dst[6];
	uint64_t sent, refused;
	uint8_t *templates;            /* flows * frame bytes */
};

static void die(const char *what, const char *name)
{
	fprintf(stderr, "nova-rdt-pktgen: %s%s%s: %s\n", what,
		name ? " " : "", name ? name : "", strerror(errno));
	exit(1);
}

static void usage(const char *why)
{
	fprintf(stderr, "nova-rdt-pktgen: %s\nusage: nova-rdt-pktgen --tx "
		"IF[,IF2] --rate PPS --duration S --size BYTES [--flows N] "
		"[--dst-mac MAC[,MAC2]] [--batch N]\n", why);
	exit(2);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int parse_mac(const char *s, unsigned char *mac)
{
	unsigned v[6];

	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3],
		   &v[4], &v[5]) != 6)
		return -1;
	for (int i = 0; i < 6; i++) {
		if (v[i] > 255)
			return -1;
		mac[i] = v[i];
	}
	return 0;
}

static void read_mac(const char *ifname, unsigned char *mac)
{
	char path[128], buf[64];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/net/%s/address", ifname);
	f = fopen(path, "r");
	if (!f || !fgets(buf, sizeof(buf), f) || parse_mac(buf, mac))
		die("cannot read the MAC address of", ifname);
	fclose(f);
}

static uint16_t ip_checksum(const uint8_t *p, int len)
{
	uint32_t sum = 0;

	for (int i = 0; i < len; i += 2)
		sum += (p[i] << 8) | p[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum & 0xffff;
}

/* Flow i of direction d: MAC, IPs and ports all vary with i. */
static void build(uint8_t *f, const struct ring *r, int d, unsigned i,
		  int size)
{
	int len = size - FCS;
	uint8_t *ip = f + 14, *udp = ip + 20;

	memset(f, 0, len);
	memcpy(f, r->dst, 6);
	if (r->dst[0] == 0x02 && r->dst[1] == 0x4e && r->dst[2] == 0x52) {
		/* The default destination varies with the flow too. */
		f[3] = (i >> 16) & 0xff;
		f[4] = (i >> 8) & 0xff;
		f[5] = i & 0xff;
	}
	memcpy(f + 6, r->src, 6);
	f[6] = (f[6] & 0xfe) | 0x02;            /* locally administered */
	f[9] ^= (i >> 16) & 0xff;
	f[10] ^= (i >> 8) & 0xff;
	f[11] ^= i & 0xff;
	f[12] = 0x08;                           /* IPv4 */
	ip[0] = 0x45;
	ip[2] = (len - 14) >> 8;
	ip[3] = (len - 14) & 0xff;
	ip[6] = 0x40;                           /* don't fragment */
	ip[8] = 64;
	ip[9] = 17;                             /* UDP */
	ip[12] = 10; ip[13] = 16 + d * 64 + ((i >> 16) & 0x3f);
	ip[14] = (i >> 8) & 0xff; ip[15] = i & 0xff;
	ip[16] = 10; ip[17] = 48 + d * 64 + ((i >> 16) & 0x3f);
	ip[18] = (i >> 8) & 0xff; ip[19] = i & 0xff;
	uint16_t c = ip_checksum(ip, 20);
	ip[10] = c >> 8;
	ip[11] = c & 0xff;
	udp[0] = 0x04; udp[1] = 0x00 + (i & 0xff);      /* 1024 + i%256 */
	udp[2] = 0x13; udp[3] = 0x88 + (i >> 8 & 0x3f); /* 5000 + ... */
	udp[4] = (len - 34) >> 8;
	udp[5] = (len - 34) & 0xff;
}

static void open_ring(struct ring *r)
{
	int v = TPACKET_V2, one = 1;
	struct tpacket_req req = {
		.tp_block_size = SLOT * 32, .tp_block_nr = SLOTS / 32,
		.tp_frame_size = SLOT, .tp_frame_nr = SLOTS,
	};
	struct sockaddr_ll sll = { .sll_family = AF_PACKET };

	/* Protocol 0: this socket receives nothing, it only sends. */
	r->fd = socket(AF_PACKET, SOCK_RAW, 0);
	if (r->fd < 0)
		die("socket(AF_PACKET) (needs CAP_NET_RAW)", NULL);
	if (setsockopt(r->fd, SOL_PACKET, PACKET_VERSION, &v, sizeof(v)))
		die("PACKET_VERSION", r->name);
	/* A virtio-net header whose hdr_len is the whole frame makes the
	 * kernel copy the frame into the skb's head instead of pointing
	 * page fragments at the ring: a veth would copy those again
	 * (skb_copy_ubufs, a page allocation per frame). */
	if (setsockopt(r->fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)))
		die("PACKET_VNET_HDR", r->name);
	if (setsockopt(r->fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one,
		       sizeof(one)))
		die("PACKET_QDISC_BYPASS", r->name);
	if (setsockopt(r->fd, SOL_PACKET, PACKET_TX_RING, &req, sizeof(req)))
		die("PACKET_TX_RING", r->name);
	r->map = mmap(NULL, (size_t)SLOT * SLOTS, PROT_READ | PROT_WRITE,
		      MAP_SHARED, r->fd, 0);
	if (r->map == MAP_FAILED)
		die("mmap of the TX ring", r->name);
	sll.sll_ifindex = if_nametoindex(r->name);
	if (!sll.sll_ifindex)
		die("no interface", r->name);
	if (bind(r->fd, (struct sockaddr *)&sll, sizeof(sll)))
		die("bind", r->name);
}

static inline struct tpacket2_hdr *slot(struct ring *r, unsigned i)
{
	return (struct tpacket2_hdr *)(r->map + (size_t)(i % SLOTS) * SLOT);
}

/* Fill up to n free slots with the next flows' frames; hand them over. */
static unsigned push(struct ring *r, unsigned n, int size, unsigned flows,
		     uint64_t *flow)
{
	unsigned done = 0;
	int len = size - FCS;

	while (done < n) {
		struct tpacket2_hdr *h = slot(r, r->head);
		unsigned status = __atomic_load_n(&h->tp_status,
						  __ATOMIC_ACQUIRE);

		if (status == TP_STATUS_WRONG_FORMAT) {
			r->refused++;
		} else if (status != TP_STATUS_AVAILABLE) {
			break;                  /* ring full: kernel behind */
		}
		uint8_t *data = (uint8_t *)h + TPACKET2_HDRLEN -
			sizeof(struct sockaddr_ll);
		struct virtio_net_hdr *vh = (struct virtio_net_hdr *)data;

		memset(vh, 0, sizeof(*vh));
		vh->hdr_len = len;              /* little-endian hosts */
		memcpy(data + sizeof(*vh),
		       r->templates + (size_t)(*flow % flows) * len, len);
		(*flow)++;
		h->tp_len = sizeof(*vh) + len;
		__atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST,
				 __ATOMIC_RELEASE);
		r->head++;
		done++;
	}
	if (done && sendto(r->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 &&
	    errno != EAGAIN && errno != ENOBUFS)
		die("sendto", r->name);
	r->sent += done;
	return done;
}

/* Frames still in the ring when time is up are not counted as sent. */
static void drain(struct ring *r)
{
	double until = now_s() + 1.0;

	for (;;) {
		unsigned pending = 0;

		for (unsigned i = 0; i < SLOTS; i++) {
			unsigned s = __atomic_load_n(&slot(r, i)->tp_status,
						     __ATOMIC_ACQUIRE);
			if (s & (TP_STATUS_SEND_REQUEST | TP_STATUS_SENDING))
				pending++;
		}
		if (!pending || now_s() > until) {
			r->sent -= pending;
			return;
		}
		sendto(r->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
		usleep(100);
	}
}

int main(int argc, char **argv)
{
	struct ring rings[MAX_IF] = {0};
	int nif = 0, size = 64, batch = 0, have_dst = 0;
	unsigned flows = 1;
	double rate = 0, duration = 0;
	char *txs = NULL, *dsts = NULL;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end;

		if (!v)
			usage("every option takes a value");
		if (!strcmp(a, "--tx"))
			txs = strdup(v);
		else if (!strcmp(a, "--dst-mac"))
			dsts = strdup(v);
		else if (!strcmp(a, "--rate"))
			rate = strtod(v, &end);
		else if (!strcmp(a, "--duration"))
			duration = strtod(v, &end);
		else if (!strcmp(a, "--size"))
			size = atoi(v);
		else if (!strcmp(a, "--flows"))
			flows = strtoul(v, &end, 10);
		else if (!strcmp(a, "--batch"))
			batch = atoi(v);
		else
			usage("unknown option");
		i++;
	}
	if (!txs)
		usage("--tx is required");
	if (!(rate > 0 && rate < 1e9))
		usage("--rate must be in (0, 1e9) frames per second");
	if (!(duration > 0 && duration <= 86400))
		usage("--duration must be in (0, 86400] seconds");
	if (size < 64 || size > MAX_FRAME)
		usage("--size must be 64-1518 bytes");
	if (flows < 1 || flows > MAX_FLOWS)
		usage("--flows must be 1-65536");
	if (batch < 0 || batch > SLOTS / 2)
		usage("--batch must be 0-512 (0: by rate)");
	for (char *tok = strtok(txs, ","); tok; tok = strtok(NULL, ",")) {
		if (nif == MAX_IF)
			usage("at most two --tx interfaces");
		rings[nif++].name = tok;
	}
	if (dsts) {
		int k = 0;

		for (char *tok = strtok(dsts, ","); tok && k < nif;
		     tok = strtok(NULL, ","), k++)
			if (parse_mac(tok, rings[k].dst))
				usage("--dst-mac takes MAC[,MAC]");
		have_dst = k;
	}
	for (int k = 0; k < nif; k++) {
		read_mac(rings[k].name, rings[k].src);
		if (k >= have_dst) {
			/* By default, locally administered unicast MACs of no
			 * interface, varied per flow: a receiving veth then
			 * drops them before IP (PACKET_OTHERHOST), so the
			 * receive side costs the generator's CPU little. */
			static const unsigned char base[6] = {
				0x02, 0x4e, 0x52, 0, 0, 0 };
			memcpy(rings[k].dst, base, 6);
		}
		rings[k].templates = malloc((size_t)flows * (size - FCS));
		if (!rings[k].templates)
			die("malloc", NULL);
		for (unsigned i = 0; i < flows; i++)
			build(rings[k].templates + (size_t)i * (size - FCS),
			      &rings[k], k, i, size);
		open_ring(&rings[k]);
	}
	/* A batch is ~20 us of traffic: big enough to amortise sendto(),
	 * small enough that the bursts stay short. */
	if (!batch) {
		batch = (int)(rate / nif * 20e-6);
		batch = batch < 1 ? 1 : batch > 128 ? 128 : batch;
	}

	/* Sleeps end within a microsecond, not the default 50 us slack; and
	 * a busy host preempts a paced sender less at nice -10 (when
	 * allowed; it sleeps between batches, so it starves no one). */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	if (setpriority(PRIO_PROCESS, 0, -10))
		errno = 0;
	uint64_t due_total = 0, flow[MAX_IF] = {0}, behind = 0;
	double per_if = rate / nif;
	double start = now_s(), end = start + duration, t;

	/* Frames owed after the sender was kept off the CPU are forgiven
	 * beyond LIMIT_S of traffic (or MAX_BATCH frames): sending them all at once would be a
	 * burst the DUT sees as overload.  They count as not sent, so the
	 * achieved rate (what the search trusts) stays true. */
	uint64_t limit = (uint64_t)(per_if * LIMIT_S);
	uint64_t skipped[MAX_IF] = {0};

	if (limit < MAX_BATCH)
		limit = MAX_BATCH;      /* a burst no bigger than at saturation */
	while ((t = now_s()) < end) {
		uint64_t due = (uint64_t)((t - start) * per_if) + 1;
		int idle = 1;

		for (int k = 0; k < nif; k++) {
			struct ring *r = &rings[k];
			if (r->sent + skipped[k] + limit < due)
				skipped[k] = due - r->sent - limit;
			if (r->sent + skipped[k] < due) {
				uint64_t want = due - r->sent - skipped[k];
				/* Behind: whole rings' worth per sendto(). */
				uint64_t most = want > 2 * (uint64_t)batch ?
					MAX_BATCH : (uint64_t)batch;
				unsigned n = (unsigned)(want < most ? want : most);
				if (push(r, n, size, flows, &flow[k]))
					idle = 0;
				if (want > 2 * (uint64_t)batch)
					behind++;
			}
		}
		if (idle) {
			/* Sleep until the next batch is due (or time is up). */
			uint64_t least = rings[0].sent + skipped[0];
			for (int k = 1; k < nif; k++)
				if (rings[k].sent + skipped[k] < least)
					least = rings[k].sent + skipped[k];
			double next = start + (least + batch) / per_if;
			if (next > end)
				next = end;
			double gap = next - now_s();
			if (gap > 5e-6) {
				struct timespec ts = {
					.tv_sec = (time_t)gap,
					.tv_nsec = (long)((gap - (time_t)gap) * 1e9),
				};
				nanosleep(&ts, NULL);
			}
		}
		due_total = due;
	}
	double elapsed = now_s() - start;
	uint64_t total = 0, refused = 0, forgiven = 0, owed = 0;

	for (int k = 0; k < nif; k++) {
		drain(&rings[k]);
		total += rings[k].sent;
		refused += rings[k].refused;
		forgiven += skipped[k];
		/* Due when time ran out but neither sent nor forgiven. */
		if (due_total > rings[k].sent + skipped[k])
			owed += due_total - rings[k].sent - skipped[k];
	}
	printf("{\"sent\": %llu, \"refused\": %llu, \"skipped\": %llu, "
	       "\"owed\": %llu, \"duration\": %.9f, "
	       "\"offered_pps\": %.3f, \"achieved_pps\": %.3f, "
	       "\"due\": %llu, \"behind_loops\": %llu, \"flows\": %u, "
	       "\"batch\": %d, \"interfaces\": %d, \"sent_per_interface\": [",
	       (unsigned long long)total, (unsigned long long)refused,
	       (unsigned long long)forgiven, (unsigned long long)owed, elapsed, rate, total / elapsed,
	       (unsigned long long)(due_total * nif),
	       (unsigned long long)behind, flows, batch, nif);
	for (int k = 0; k < nif; k++)
		printf("%s%llu", k ? ", " : "",
		       (unsigned long long)rings[k].sent);
	printf("]}\n");
	return 0;
}
