"""The exporter's own page at ``/``: the way map and live bars, readable
with no Grafana.  ``layout()`` is the JSON the page polls
(``/api/layout``); the page builds its DOM from it with ``textContent``
and ``setAttribute`` only, so names from instances never become markup.
"""

from __future__ import annotations

from nova_rdt.exporter import waymap


def layout(host: str, s, bw) -> dict:
    doc = {"host": host, "available": s.available, "error": s.error,
           "taken_at": s.taken_at, "caches": [], "groups": []}
    if not s.available:
        return doc
    doc["clos"] = {"total": s.caps.clos_count, "used": waymap.clos_used(s)}
    for cm in waymap.cache_maps(s):
        doc["caches"].append({
            "resource": cm.resource, "cache_id": cm.cache_id,
            "type": cm.cache_type, "ways": cm.ways, "free": cm.free,
            "largest_free_run": cm.largest_free_run,
            "cells": [{"way": way, "owners": [
                {"group": g.name, "kind": g.identity.kind,
                 "label": waymap.label(g)} for g in holders]}
                for way, holders in enumerate(cm.holders)]})
    for g in s.groups:
        rates = {}
        for r in g.readings:
            b = bw.get((g.name, r.domain))
            if b is not None and b.total_rate is not None:
                rates[str(r.domain)] = b.total_rate
        doc["groups"].append({
            "group": g.name, "kind": g.identity.kind, "label": waymap.label(g),
            "instance_uuid": g.identity.instance_uuid,
            "flavor": g.identity.flavor, "tasks": g.tasks,
            "occupancy": {str(r.domain): r.llc_occupancy
                          for r in g.readings
                          if r.llc_occupancy is not None},
            "bandwidth": rates})
    return doc


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>nova-rdt: cache ways</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em;margin:0 0 .2em} h2{font-size:1.05em;margin:1.2em 0 .4em}
.meta{color:#666;margin-bottom:1em}
.map{display:flex;gap:2px;margin:.3em 0 .2em}
.way{width:38px;height:38px;border:1px solid #888;display:flex;
 align-items:flex-end;justify-content:center;font-size:11px;color:#000}
.way.free{background:#fff;border-style:dashed}
.caption{font-size:12px;color:#555}
.legend span{display:inline-block;margin:0 1em .3em 0}
.swatch{display:inline-block;width:12px;height:12px;margin-right:4px;
 vertical-align:middle;border:1px solid #888}
table.bars{border-collapse:collapse} .bars td{padding:2px 8px 2px 0}
.bar{height:12px;background:#4a7ebb;display:inline-block}
.err{color:#b00}
</style></head><body>
<h1>Cache ways on <span id="host"></span></h1>
<div class="meta" id="meta"></div>
<div id="maps"></div>
<div class="legend" id="legend"></div>
<h2>L3 occupancy</h2><table class="bars" id="occ"></table>
<h2>Memory bandwidth</h2><table class="bars" id="bw"></table>
<script>
"use strict";
const KIND = {host:"#bdbdbd", pmd:"#f28e2b", class:"#b07aa1",
              foreign:"#e15759"};
const PALETTE = ["#4e79a7","#59a14f","#76b7b2","#edc948","#9c755f",
                 "#86bcb6","#8cd17d","#a0cbe8","#ffbe7d","#d4a6c8"];
const colours = new Map();
function colour(o){
  if (KIND[o.kind]) return KIND[o.kind];
  if (!colours.has(o.group))
    colours.set(o.group, PALETTE[colours.size % PALETTE.length]);
  return colours.get(o.group);
}
function el(tag, attrs, text){
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function bytes(n){
  const u = ["B","KiB","MiB","GiB"]; let i = 0;
  while (n >= 1024 && i < u.length - 1){ n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + " " + u[i];
}
function bars(table, rows, fmt){
  table.replaceChildren();
  const max = Math.max(1, ...rows.map(r => r[1]));
  for (const [label, v, o] of rows){
    const tr = el("tr", {"data-group": o.group});
    tr.append(el("td", {}, label));
    const td = el("td");
    const bar = el("span", {class: "bar"});
    bar.style.width = Math.max(1, Math.round(300 * v / max)) + "px";
    bar.style.background = colour(o);
    td.append(bar);
    tr.append(td, el("td", {}, fmt(v)));
    table.append(tr);
  }
}
function render(d){
  document.getElementById("host").textContent = d.host;
  const meta = document.getElementById("meta");
  const maps = document.getElementById("maps");
  maps.replaceChildren();
  if (!d.available){
    meta.replaceChildren(el("span", {class: "err", id: "no-rdt"},
                            "No RDT on this host: " + (d.error || "?")));
    return;
  }
  meta.textContent = "CLOS " + d.clos.used + " of " + d.clos.total +
    " used \\u00b7 updated " +
    new Date(d.taken_at * 1000).toLocaleTimeString();
  const seen = new Map();
  for (const c of d.caches){
    const box = el("div", {class: "cache", "data-cache":
                           c.resource + ":" + c.cache_id});
    box.append(el("h2", {}, c.resource + " cache id " + c.cache_id +
                  (c.type !== "both" ? " (" + c.type + ")" : "")));
    const row = el("div", {class: "map"});
    // Highest way on the left, as CBMs are written.
    for (const cell of [...c.cells].reverse()){
      const owners = cell.owners;
      const div = el("div", {class: "way" + (owners.length ? "" : " free"),
        "data-way": String(cell.way),
        "data-owners": owners.map(o => o.group).join("|"),
        "data-kinds": owners.map(o => o.kind).join("|"),
        title: "way " + cell.way + ": " +
               (owners.map(o => o.label).join(" + ") || "free")},
        String(cell.way));
      const cs = owners.map(colour);
      if (cs.length === 1) div.style.background = cs[0];
      else if (cs.length > 1){
        // Overlap (the PMD COS over its VMs): one stripe per owner.
        const stops = cs.map((c, i) => c + " " + (i * 100 / cs.length) +
          "% " + ((i + 1) * 100 / cs.length) + "%");
        div.style.background = "linear-gradient(135deg," + stops + ")";
      }
      for (const o of owners) seen.set(o.group, o);
      row.append(div);
    }
    box.append(row, el("div", {class: "caption"}, c.free + " free, " +
               "largest free run " + c.largest_free_run + " of " + c.ways));
    maps.append(box);
  }
  const legend = document.getElementById("legend");
  legend.replaceChildren();
  for (const o of seen.values()){
    const s = el("span", {"data-group": o.group});
    const sw = el("span", {class: "swatch"});
    sw.style.background = colour(o);
    s.append(sw, document.createTextNode(o.label + " (" + o.kind + ")"));
    legend.append(s);
  }
  const sum = m => Object.values(m).reduce((a, b) => a + b, 0);
  bars(document.getElementById("occ"),
       d.groups.filter(g => Object.keys(g.occupancy).length)
               .map(g => [g.label, sum(g.occupancy), g]), bytes);
  bars(document.getElementById("bw"),
       d.groups.filter(g => Object.keys(g.bandwidth).length)
               .map(g => [g.label, sum(g.bandwidth), g]),
       v => bytes(v) + "/s");
  document.body.setAttribute("data-ready", "1");
}
async function poll(){
  try {
    const r = await fetch("api/layout", {cache: "no-store"});
    render(await r.json());
  } catch (e) {
    document.getElementById("meta").textContent = "exporter unreachable: " + e;
  }
  setTimeout(poll, 2000);
}
poll();
</script></body></html>
"""
