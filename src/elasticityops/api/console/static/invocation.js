// One invocation: its timeline as a waterfall (queue, capacity, start, run), notes, exit code,
// result preview, and its log tail, followed while it runs; live through the event stream.
import { api, events, stream } from "./api.js";
import { COST_PHASES, TERMINAL, el, phases, preview, seconds, usd, when } from "./format.js";

const LOG_TAIL = 16 * 1024;  // characters of output kept on the page

export function render(main, id) {
  const heading = el("h1", { text: id });
  const summary = el("dl", { class: "facts" });
  const waterfall = el("div", { class: "waterfall", role: "img", "aria-label": "timeline" });
  const cost = el("dl", { class: "costs", id: "cost" });
  const notes = el("ol", { class: "notes" });
  const result = el("pre", { class: "result", tabindex: "0", "aria-label": "result" });
  const logs = el("pre", { class: "logs", id: "logs", tabindex: "0", "aria-label": "log tail" });
  const cancel = el("button", { type: "button", id: "cancel", hidden: true, text: "Cancel" });
  const error = el("p", { class: "error", role: "alert" });
  main.append(el("p", {}, el("a", { href: "#/invocations", text: "← Invocations" })), heading, cancel, error,
    summary, el("h2", { text: "Timeline" }), waterfall,
    el("h2", { text: "Cost (node-seconds)" }), cost, el("h2", { text: "Notes" }), notes,
    el("h2", { text: "Result" }), result, el("h2", { text: "Log tail" }), logs);

  const aborter = new AbortController();
  let inv = null;
  let following = false;
  let ticker = null;

  function fact(name, value) {
    return [el("dt", { text: name }), el("dd", { text: value ?? "–" })];
  }

  function draw() {
    summary.replaceChildren(
      ...fact("Function", `${inv.function} (version ${inv.spec_version})`),
      ...fact("State", inv.state),
      ...fact("Attempt", String(inv.attempt)),
      ...fact("Accepted", when(inv.timeline.accepted)),
      ...fact("Time to start", seconds(inv.durations.time_to_start)),
      ...fact("Exit code", inv.exit_code === null ? null : String(inv.exit_code)),
      ...fact("Failure", inv.failure_reason),
      ...fact("Message", inv.message || null),
      ...fact("Node", inv.node),
      ...fact("GPU type", inv.gpu_type),
      ...(inv.queue_reason ? fact("Queue", `#${inv.queue_position}: ${inv.queue_reason}`) : []),
    );
    summary.dataset.state = inv.state;
    const now = Date.now();
    const spans = phases(inv.timeline, now);
    const start = spans.length ? spans[0][1] : now;
    const total = Math.max(1, Math.max(start, ...spans.map((s) => s[2])) - start);
    waterfall.replaceChildren(...spans.map(([name, a, b]) => el("div", { class: "phase", "data-phase": name },
      el("span", { class: "label", text: name }),
      el("span", { class: "track" }, el("span", {
        class: `bar p-${name}`,
        style: { marginLeft: `${((a - start) / total) * 100}%`, width: `${Math.max(0.5, ((b - a) / total) * 100)}%` },
      })),
      el("span", { class: "value", text: seconds((b - a) / 1000) }))));
    waterfall.setAttribute("aria-label", `timeline: ${spans.map(([n, a, b]) => `${n} ${seconds((b - a) / 1000)}`).join(", ")}`);
    drawCost(inv.cost, inv.node_capacity);
    notes.replaceChildren(...(inv.notes.length ? inv.notes.map((n) => el("li", {},
      el("time", { text: when(n.at) }), " ", el("strong", { text: n.kind }), ` ${n.message}`))
      : [el("li", { class: "muted", text: "none" })]));
    result.textContent = preview(inv.result) || "(none yet)";
    cancel.hidden = TERMINAL.has(inv.state);
  }

  // The node time it caused by phase (GET /v1/invocations/{id} `cost`); phases of no time are
  // left out, so a run on a warm slot reads as one line. `capacity`: what its current (or last)
  // attempt's node is priced as (spot, on-demand, local), null while no node is known.
  function drawCost(c, capacity) {
    if (!c) { cost.replaceChildren(el("dd", { class: "muted", text: "not known" })); return; }
    const spent = COST_PHASES.filter(([p]) => c.node_seconds[p] > 0);
    cost.dataset.open = String(c.open);
    cost.replaceChildren(...spent.flatMap(([p, name]) => [el("dt", { text: name }),
      el("dd", { "data-phase": p, "data-seconds": c.node_seconds[p].toFixed(3), text: seconds(c.node_seconds[p]) })]),
    ...fact("Total", `${seconds(c.total_node_seconds)}${c.open ? " so far (under way)" : ""}`),
    ...fact("Cost", c.unpriced_node_seconds ? `${usd(c.usd)} + ${seconds(c.unpriced_node_seconds)} unpriced` : usd(c.usd)),
    el("dt", { text: "Node priced as" }), el("dd", { "data-capacity": capacity ?? "", text: capacity ?? "–" }));
  }

  async function load() {
    inv = await api(`/v1/invocations/${encodeURIComponent(id)}`);
    draw();
    if (!following && inv.state !== "queued" && inv.state !== "pending") followLogs();
    clearInterval(ticker);
    ticker = TERMINAL.has(inv.state) ? null : setInterval(draw, 500);  // bars under way grow
  }

  async function followLogs() {
    following = true;
    let text = "";
    try {
      await stream(`/v1/invocations/${encodeURIComponent(id)}/logs?follow=${TERMINAL.has(inv.state) ? "false" : "true"}`,
        (chunk) => {
          text = (text + chunk).slice(-LOG_TAIL);
          logs.textContent = text;
          logs.scrollTop = logs.scrollHeight;
        }, aborter.signal);
      if (!text) logs.textContent = "(no output)";
    } catch (e) {
      if (e.name !== "AbortError") logs.textContent = `(logs: ${e.message})`;
    }
  }

  cancel.addEventListener("click", async () => {
    error.textContent = "";
    try {
      inv = await api(`/v1/invocations/${encodeURIComponent(id)}/cancel`, { method: "POST" });
      draw();
    } catch (e) {
      error.textContent = e.message;
    }
  });

  const close = events([id], (changes) => {
    if (changes === null || changes.some((c) => c.id === id)) load().catch((e) => { error.textContent = e.message; });
  });
  load().catch((e) => { error.textContent = e.message; if (e.status === 401) throw e; });
  return () => { close(); aborter.abort(); clearInterval(ticker); };
}
