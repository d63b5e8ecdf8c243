/*
 * nova-rdt-pktgen: the send fast path of nova-rdt's software RFC 2544
 * generator.  The Python worker (swworker.py) stays the control plane:
 * it reads the interface counters, sends and times the latency probes,
 * and runs this for the bulk traffic of one trial.
 *
 *   nova-rdt-pktgen --tx IF[,IF2] --rate PPS --duration S --size BYTES
 *                   [--flows N] [--dst-mac MAC[,MAC2]] [--batch N]
 *                   [--threads N] [--window S]
 *
 * With two interfaces both directions run at once, each at half the
 * rate.  Frames are IPv4/UDP; flow i varies the source MAC, the source
 * and destination IP and the UDP ports (and the destination MAC unless
 * --dst-mac fixes it), so a switch's exact-match and megaflow caches see
 * real flow churn.
 *
 * Fast path: sending threads (by default one per CPU this process may
 * run on, at least one per interface), each with its own PACKET_MMAP TX
 * ring (TPACKET_V2, PACKET_QDISC_BYPASS) on its interface: frames are
 * copied from prebuilt per-flow templates into ring slots and handed to
 * the kernel in batches, one sendto() each.  Nearly all of a frame's cost
 * is the kernel's (an skb, the veth, the receiver's softirq on the same
 * CPU), so more frames per second need more CPUs, not less user code.
 *
 * Rate control (pacer.h): one pacer per interface, shared by its
 * threads, so any of them sends what is due; kept off the CPU, they make
 * up to --window seconds of owed frames at once (late) and give up the
 * rest (skipped), so the trial's count of frames sent is rate x duration
 * whenever the rate can be reached, and says by how much it fell short
 * when it cannot.
 *
 * Prints one JSON object: frames handed to the kernel, refused, late,
 * skipped and still owed at the end, the real elapsed time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
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

#include "pacer.h"

#define MAX_IF 2
#define MAX_THREADS 16
#define MAX_FLOWS 65536
#define MAX_FRAME 1518
#define FCS 4
#define SLOT 2048
#define SLOTS 1024                 /* per ring */
#define MAX_BATCH 256              /* frames per sendto() when behind */

struct port {                      /* one interface, one direction */
	const char *name;
	unsigned char src[6], dst[6];
	uint8_t *templates;        /* flows * frame bytes */
	/* One pacer for the port's threads, so that one kept off its CPU
	 * leaves its share to the others rather than giving it up. */
	pthread_mutex_t lock;
	struct pacer pacer;
};

struct worker {                    /* one thread, one TX ring */
	struct port *port;
	int fd;
	uint8_t *map;
	unsigned head;             /* next slot to fill */
	uint64_t refused, flow, pending, loops_behind;
	pthread_t thread;
};

static int size = 64;
static unsigned flows = 1;
static double start_time;
static pthread_barrier_t ready;

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
		"[--dst-mac MAC[,MAC2]] [--batch N] [--threads N] "
		"[--window S]\n", why);
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
static void build(uint8_t *f, const struct port *r, int d, unsigned i)
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

static void open_ring(struct worker *w)
{
	int v = TPACKET_V2, one = 1;
	struct tpacket_req req = {
		.tp_block_size = SLOT * 32, .tp_block_nr = SLOTS / 32,
		.tp_frame_size = SLOT, .tp_frame_nr = SLOTS,
	};
	struct sockaddr_ll sll = { .sll_family = AF_PACKET };
	const char *name = w->port->name;

	/* Protocol 0: this socket receives nothing, it only sends. */
	w->fd = socket(AF_PACKET, SOCK_RAW, 0);
	if (w->fd < 0)
		die("socket(AF_PACKET) (needs CAP_NET_RAW)", NULL);
	if (setsockopt(w->fd, SOL_PACKET, PACKET_VERSION, &v, sizeof(v)))
		die("PACKET_VERSION", name);
	/* A virtio-net header whose hdr_len is the whole frame makes the
	 * kernel copy the frame into the skb's head instead of pointing
	 * page fragments at the ring: a veth would copy those again
	 * (skb_copy_ubufs, a page allocation per frame). */
	if (setsockopt(w->fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)))
		die("PACKET_VNET_HDR", name);
	if (setsockopt(w->fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one,
		       sizeof(one)))
		die("PACKET_QDISC_BYPASS", name);
	if (setsockopt(w->fd, SOL_PACKET, PACKET_TX_RING, &req, sizeof(req)))
		die("PACKET_TX_RING", name);
	w->map = mmap(NULL, (size_t)SLOT * SLOTS, PROT_READ | PROT_WRITE,
		      MAP_SHARED, w->fd, 0);
	if (w->map == MAP_FAILED)
		die("mmap of the TX ring", name);
	sll.sll_ifindex = if_nametoindex(name);
	if (!sll.sll_ifindex)
		die("no interface", name);
	if (bind(w->fd, (struct sockaddr *)&sll, sizeof(sll)))
		die("bind", name);
}

static inline struct tpacket2_hdr *slot(struct worker *w, unsigned i)
{
	return (struct tpacket2_hdr *)(w->map + (size_t)(i % SLOTS) * SLOT);
}

/* Fill up to n free slots with the next flows' frames; hand them over.
 * Returns how many the kernel took. */
static unsigned push(struct worker *w, unsigned n)
{
	unsigned done = 0;
	int len = size - FCS;

	while (done < n) {
		struct tpacket2_hdr *h = slot(w, w->head);
		unsigned status = __atomic_load_n(&h->tp_status,
						  __ATOMIC_ACQUIRE);

		if (status == TP_STATUS_WRONG_FORMAT)
			w->refused++;
		else if (status != TP_STATUS_AVAILABLE)
			break;                  /* ring full: kernel behind */
		uint8_t *data = (uint8_t *)h + TPACKET2_HDRLEN -
			sizeof(struct sockaddr_ll);
		struct virtio_net_hdr *vh = (struct virtio_net_hdr *)data;

		memset(vh, 0, sizeof(*vh));
		vh->hdr_len = len;              /* little-endian hosts */
		memcpy(data + sizeof(*vh),
		       w->port->templates + (size_t)(w->flow % flows) * len,
		       len);
		w->flow++;
		h->tp_len = sizeof(*vh) + len;
		__atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST,
				 __ATOMIC_RELEASE);
		w->head++;
		done++;
	}
	if (done && sendto(w->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 &&
	    errno != EAGAIN && errno != ENOBUFS)
		die("sendto", w->port->name);
	return done;
}

/* Frames still in the ring when time is up were not sent. */
static uint64_t drain(struct worker *w)
{
	double until = now_s() + 1.0;

	for (;;) {
		unsigned pending = 0;

		for (unsigned i = 0; i < SLOTS; i++) {
			unsigned s = __atomic_load_n(&slot(w, i)->tp_status,
						     __ATOMIC_ACQUIRE);
			if (s & (TP_STATUS_SEND_REQUEST | TP_STATUS_SENDING))
				pending++;
		}
		if (!pending || now_s() > until)
			return pending;
		sendto(w->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
		usleep(100);
	}
}

static void *run(void *arg)
{
	struct worker *w = arg;
	struct port *port = w->port;
	struct pacer *p = &port->pacer;

	pthread_barrier_wait(&ready);
	for (;;) {
		double t, next;
		uint64_t n = 0, owed;

		pthread_mutex_lock(&port->lock);
		t = now_s() - start_time;
		if (pacer_done(p, t)) {
			pthread_mutex_unlock(&port->lock);
			break;
		}
		owed = pacer_owed(p, t);
		/* Behind: whole rings' worth per sendto(). */
		n = pacer_plan(p, t, owed > 2 * p->batch ? MAX_BATCH
							   : p->batch);
		/* Counted as sent now, so no other thread sends them too. */
		pacer_sent(p, t, n);
		next = pacer_next(p);
		pthread_mutex_unlock(&port->lock);
		if (n) {
			unsigned k = push(w, (unsigned)n);

			if (owed > 2 * p->batch)
				w->loops_behind++;
			if (k < n) {
				pthread_mutex_lock(&port->lock);
				pacer_unsend(p, n - k);
				pthread_mutex_unlock(&port->lock);
			}
			continue;
		}
		/* Sleep until the next batch is due (or the trial's end). */
		double gap = next - (now_s() - start_time);

		if (gap > p->duration - t)
			gap = p->duration - t;
		if (gap > 5e-6) {
			struct timespec ts = {
				.tv_sec = (time_t)gap,
				.tv_nsec = (long)((gap - (time_t)gap) * 1e9),
			};
			nanosleep(&ts, NULL);
		}
	}
	w->pending = drain(w);
	return NULL;
}

static int cpus_allowed(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 1;
	return CPU_COUNT(&set);
}

int main(int argc, char **argv)
{
	static struct port ports[MAX_IF];
	static struct worker workers[MAX_THREADS];
	int nif = 0, batch = 0, have_dst = 0, threads = 0;
	double rate = 0, duration = 0, window = 0.05;
	char *txs = NULL, *dsts = NULL, *end;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

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
		else if (!strcmp(a, "--window"))
			window = strtod(v, &end);
		else if (!strcmp(a, "--size"))
			size = atoi(v);
		else if (!strcmp(a, "--flows"))
			flows = strtoul(v, &end, 10);
		else if (!strcmp(a, "--batch"))
			batch = atoi(v);
		else if (!strcmp(a, "--threads"))
			threads = atoi(v);
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
	if (!(window >= 0 && window <= 1))
		usage("--window must be in [0, 1] seconds");
	if (size < 64 || size > MAX_FRAME)
		usage("--size must be 64-1518 bytes");
	if (flows < 1 || flows > MAX_FLOWS)
		usage("--flows must be 1-65536");
	if (batch < 0 || batch > SLOTS / 2)
		usage("--batch must be 0-512 (0: by rate)");
	if (threads < 0 || threads > MAX_THREADS)
		usage("--threads must be 0-16 (0: one per CPU)");
	for (char *tok = strtok(txs, ","); tok; tok = strtok(NULL, ",")) {
		if (nif == MAX_IF)
			usage("at most two --tx interfaces");
		ports[nif++].name = tok;
	}
	if (dsts) {
		int k = 0;

		for (char *tok = strtok(dsts, ","); tok && k < nif;
		     tok = strtok(NULL, ","), k++)
			if (parse_mac(tok, ports[k].dst))
				usage("--dst-mac takes MAC[,MAC]");
		have_dst = k;
	}
	for (int k = 0; k < nif; k++) {
		read_mac(ports[k].name, ports[k].src);
		if (k >= have_dst) {
			/* By default, locally administered unicast MACs of no
			 * interface, varied per flow: a receiving veth then
			 * drops them before IP (PACKET_OTHERHOST), so the
			 * receive side costs the generator's CPU little. */
			static const unsigned char base[6] = {
				0x02, 0x4e, 0x52, 0, 0, 0 };
			memcpy(ports[k].dst, base, 6);
		}
		ports[k].templates = malloc((size_t)flows * (size - FCS));
		if (!ports[k].templates)
			die("malloc", NULL);
		for (unsigned i = 0; i < flows; i++)
			build(ports[k].templates + (size_t)i * (size - FCS),
			      &ports[k], k, i);
	}
	/* Threads: a whole number per interface, so both directions get the
	 * same share of the CPUs. */
	if (!threads)
		threads = cpus_allowed();
	threads = (threads + nif - 1) / nif * nif;
	if (threads > MAX_THREADS)
		threads = MAX_THREADS / nif * nif;
	double port_rate = rate / nif;

	/* A batch is ~20 us of traffic: big enough to amortise sendto(),
	 * small enough that the bursts stay short. */
	if (!batch) {
		batch = (int)(port_rate * 20e-6);
		batch = batch < 1 ? 1 : batch > 128 ? 128 : batch;
	}
	/* Sleeps end within a microsecond, not the default 50 us slack; and
	 * a busy host preempts a paced sender less at nice -10 (when
	 * allowed; it sleeps between batches, so it starves no one).  Both
	 * are inherited by the threads. */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	if (setpriority(PRIO_PROCESS, 0, -10))
		errno = 0;
	/* The trial's frames split exactly between the interfaces. */
	uint64_t total = (uint64_t)(rate * duration + 0.5);

	for (int k = 0; k < nif; k++) {
		pacer_init(&ports[k].pacer, port_rate, duration, window, batch);
		ports[k].pacer.total = total / nif + ((uint64_t)k < total % nif);
		pthread_mutex_init(&ports[k].lock, NULL);
	}
	for (int i = 0; i < threads; i++) {
		struct worker *w = &workers[i];

		w->port = &ports[i % nif];
		/* Threads of one port start at different flows. */
		w->flow = (uint64_t)(i / nif) * flows / (threads / nif);
		open_ring(w);
	}
	if (pthread_barrier_init(&ready, NULL, threads + 1))
		die("pthread_barrier_init", NULL);
	for (int i = 0; i < threads; i++)
		if ((errno = pthread_create(&workers[i].thread, NULL, run,
					    &workers[i])))
			die("pthread_create", NULL);
	start_time = now_s();
	pthread_barrier_wait(&ready);
	for (int i = 0; i < threads; i++)
		pthread_join(workers[i].thread, NULL);
	double elapsed = now_s() - start_time;
	uint64_t sent = 0, refused = 0, skipped = 0, late = 0, owed = 0;
	uint64_t behind = 0, per_if[MAX_IF] = {0};

	for (int k = 0; k < nif; k++) {
		struct pacer *p = &ports[k].pacer;

		per_if[k] = p->sent;
		skipped += p->skipped;
		late += p->late;
		/* Due but neither sent nor given up: still owed at the end. */
		owed += pacer_unsent(p);
	}
	for (int i = 0; i < threads; i++) {
		struct worker *w = &workers[i];

		/* Left in the ring when time was up: not sent, still owed. */
		per_if[i % nif] -= w->pending;
		owed += w->pending;
		refused += w->refused;
		behind += w->loops_behind;
	}
	for (int k = 0; k < nif; k++)
		sent += per_if[k];
	printf("{\"sent\": %llu, \"refused\": %llu, \"skipped\": %llu, "
	       "\"late\": %llu, \"owed\": %llu, \"due\": %llu, "
	       "\"duration\": %.9f, \"trial_duration\": %.9f, "
	       "\"window\": %.6f, \"offered_pps\": %.3f, "
	       "\"achieved_pps\": %.3f, \"behind_loops\": %llu, "
	       "\"flows\": %u, \"batch\": %d, \"threads\": %d, "
	       "\"interfaces\": %d, \"sent_per_interface\": [",
	       (unsigned long long)sent, (unsigned long long)refused,
	       (unsigned long long)skipped, (unsigned long long)late,
	       (unsigned long long)owed, (unsigned long long)total, elapsed,
	       duration, window, rate, sent / elapsed,
	       (unsigned long long)behind, flows, batch, threads, nif);
	for (int k = 0; k < nif; k++)
		printf("%s%llu", k ? ", " : "", (unsigned long long)per_if[k]);
	printf("]}\n");
	return 0;
}
