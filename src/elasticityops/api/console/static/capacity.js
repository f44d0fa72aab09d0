// Capacity: GPUs in use per type against the budget, the queue and its head, warm headroom,
// GPU nodes by state, and the last hours as a chart; redrawn on changes (at most once a
// second) and every few seconds for the chart's samples.
import { api, events } from "./api.js";
import { el, seconds, when } from "./format.js";

const SVG = "http://www.w3.org/2000/svg";
const LINES = [["demand", "demand (GPUs in use + queued)"], ["nodes", "GPU nodes / slots"], ["headroom_held", "warm headroom held"]];

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

function chart(history) {
  const width = 1000, height = 220, pad = 30;
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img",
    "aria-label": `demand, nodes and headroom over the last ${history.length} samples` });
  if (history.length < 2) {
    const text = svg("text", { x: pad, y: height / 2 });
    text.textContent = "Not enough samples yet.";
    root.append(text);
    return root;
  }
  const t0 = Date.parse(history[0].at), t1 = Date.parse(history[history.length - 1].at);
  const top = Math.max(1, ...history.flatMap((s) => LINES.map(([k]) => s[k] ?? 0)));
  const x = (s) => pad + ((Date.parse(s.at) - t0) / Math.max(1, t1 - t0)) * (width - 2 * pad);
  const y = (v) => height - pad - (v / top) * (height - 2 * pad);
  root.append(svg("line", { x1: pad, y1: height - pad, x2: width - pad, y2: height - pad, class: "axis" }));
  for (const [text, at, anchor] of [[String(top), [2, pad - 8], "start"],
    [new Date(t0).toLocaleTimeString(), [pad, height - 8], "start"],
    [new Date(t1).toLocaleTimeString(), [width - pad, height - 8], "end"]]) {
    const label = svg("text", { x: at[0], y: at[1], class: "tick", "text-anchor": anchor });
    label.textContent = text;
    root.append(label);
  }
  for (const [key] of LINES) {
    const points = history.filter((s) => s[key] !== null).map((s) => `${x(s).toFixed(1)},${y(s[key]).toFixed(1)}`);
    root.append(svg("polyline", { points: points.join(" "), class: `line l-${key}` }));
  }
  return root;
}

function meter(label, used, cap) {
  const pct = cap ? Math.min(100, (used / cap) * 100) : 0;
  return el("div", { class: "meter" },
    el("span", { class: "label", text: label }),
    el("span", { class: "track" }, el("span", { class: "bar", style: { width: `${cap ? pct : 0}%` } })),
    el("span", { class: "value", text: cap === null || cap === undefined ? `${used} (no cap)` : `${used} / ${cap}` }));
}

export function render(main) {
  const gpus = el("section", { class: "card", id: "gpus", "aria-labelledby": "h-gpus" });
  const queue = el("section", { class: "card", id: "queue", "aria-labelledby": "h-queue" });
  const warm = el("section", { class: "card", id: "warm", "aria-labelledby": "h-warm" });
  const nodes = el("section", { class: "card", id: "nodes", "aria-labelledby": "h-nodes" });
  const history = el("section", { class: "card wide", id: "history", "aria-labelledby": "h-history" });
  const error = el("p", { class: "error", role: "alert" });
  main.append(el("h1", { text: "Capacity" }), error, el("div", { class: "cards" }, gpus, queue, warm, nodes, history));

  function draw(c) {
    const types = Object.keys(c.budget_by_type);
    gpus.replaceChildren(el("h2", { id: "h-gpus", text: "GPUs in use" }),
      // Without a budget, a backend with a fixed number of GPUs (local slots) is the cap.
      meter(c.budget_total === null && c.total_gpus !== null ? "all (slots)" : "all types",
        c.in_use_total, c.budget_total ?? c.total_gpus),
      ...types.map((t) => meter(t, c.in_use[t] || 0, c.budget_by_type[t])),
      el("p", { class: "muted", text: c.budget ? `budget ${c.budget}` : "no GPU budget set" }));
    gpus.dataset.inUse = String(c.in_use_total);
    const head = c.queue_head;
    queue.replaceChildren(el("h2", { id: "h-queue", text: "Queue" }),
      el("p", { class: "big", "data-queue": String(c.queue_length), text: `${c.queue_length} waiting` }),
      el("p", {}, head ? ["next: ", el("a", { href: `#/invocations/${head.id}`, text: head.id }),
        ` (${head.function}, ${head.priority}), waiting ${seconds(head.waiting_s)}`] : "nothing waiting"),
      el("p", { class: "muted", text: `${c.states.pending || 0} pending, ${c.states.running || 0} running` }));
    const pools = c.headroom;
    warm.replaceChildren(el("h2", { id: "h-warm", text: "Warm headroom" }),
      pools === null ? el("p", { class: "muted", text: c.role === "follower" ? "held by the leader" : "off" })
        : pools.length ? pools.map((p) => meter(p.describe, p.busy, p.held))
          : el("p", { class: "muted", text: "no pools" }));
    nodes.replaceChildren(el("h2", { id: "h-nodes", text: c.nodes ? "GPU nodes" : "GPU slots" }),
      c.nodes ? el("dl", { class: "facts" }, Object.entries(c.nodes).flatMap(([k, v]) =>
        [el("dt", { text: k.replace("_", " ") }), el("dd", { text: String(v) })]))
        : el("p", { text: c.total_gpus === null ? "no fixed number" : `${c.free_gpus} free of ${c.total_gpus}` }));
    history.replaceChildren(el("h2", { id: "h-history", text: "Last hours" }), chart(c.history),
      el("p", { class: "legend" }, LINES.map(([k, text]) => el("span", { class: `key l-${k}`, text }))),
      el("p", { class: "muted", text: `a sample every ${seconds(c.sample_s)} (this replica's memory); now ${when(c.at)}` }));
  }

  // The whole history once, then only the samples after the last one held: a refresh every
  // few seconds would otherwise carry up to keep_s / sample_s samples each time. The gateway
  // answers only samples after `since`, so an answer is appended as it comes.
  let samples = [];
  function merge(c) {
    const oldest = Date.parse(c.at) - c.keep_s * 1000;
    samples = samples.concat(c.history).filter((s) => Date.parse(s.at) >= oldest);
    return { ...c, history: samples };
  }

  let busy = false, again = false, timer = null;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    const last = samples.length ? samples[samples.length - 1].at : null;
    const path = last === null ? "/v1/capacity" : `/v1/capacity?since=${encodeURIComponent(last)}`;
    api(path).then((c) => draw(merge(c))).catch((e) => { error.textContent = e.message; if (e.status === 401) throw e; })
      .finally(() => { busy = false; if (again) { again = false; setTimeout(refresh, 1000); } });
  }
  const close = events([], refresh);
  timer = setInterval(refresh, 5000);
  refresh();
  return () => { close(); clearInterval(timer); };
}
