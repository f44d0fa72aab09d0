// One invocation: its timeline as a waterfall (queue, capacity, start, run; through Kueue the
// capacity wait is kueue, then capacity), notes, exit code, result preview (or, once it ended
// without one, why), and its log tail, followed while it runs; live through the event stream.
import { api, events, stream } from "./api.js";
import { COST_PHASES, TERMINAL, el, phases, preview, scroll, seconds, usd, when } from "./format.js";

const LOG_TAIL = 16 * 1024;  // characters of output kept on the page
const WHY_LINES = 12;  // lines of output a failure's explanation quotes
const REREAD_MS = 10_000;  // an attempt under way: its cost in dollars read again this often

// The phase of node time an attempt under way adds to (domain/node_seconds.py attempt_spans).
function growing(timeline) {
  if (timeline.started) return "run";
  return timeline.capacity_ready ? "idle_before_start" : null;
}

export function render(main, id) {
  const heading = el("h1", { text: id });
  const summary = el("dl", { class: "facts" });
  const waterfall = el("div", { class: "waterfall", role: "img", "aria-label": "timeline" });
  const cost = el("dl", { class: "costs", id: "cost" });
  const notes = el("ol", { class: "notes", id: "notes" });
  const notesHeading = el("h2", { text: "Notes" });
  const result = el("pre", { class: "result", tabindex: "0", "aria-label": "result" });
  const logs = el("pre", { class: "logs", id: "logs", tabindex: "0", "aria-label": "log tail" });
  // Its webhook messages and how their delivery went (GET /v1/invocations/{id}/webhooks); the
  // section is left out for an invocation with none.
  const hooksHeading = el("h2", { text: "Webhooks", hidden: true });
  const hooksBody = el("tbody");
  const hooks = el("table", { class: "list", id: "webhooks", "aria-label": "webhook deliveries" },
    el("thead", {}, el("tr", {}, ["Event", "Attempts", "Last answer", "Delivered", "Next attempt"]
      .map((h) => el("th", { scope: "col", text: h })))), hooksBody);
  const hooksBox = scroll(hooks);
  hooksBox.hidden = true;
  const cancel = el("button", { type: "button", id: "cancel", hidden: true, text: "Cancel" });
  const error = el("p", { class: "error", role: "alert" });
  main.append(el("p", {}, el("a", { href: "#/invocations", text: "← Invocations" })), heading, cancel, error,
    summary, el("h2", { text: "Timeline" }), waterfall,
    el("h2", { text: "Cost (node-seconds)" }), cost, notesHeading, notes,
    el("h2", { text: "Result" }), result, hooksHeading, hooksBox, el("h2", { text: "Log tail" }), logs);

  const aborter = new AbortController();
  let inv = null;
  let following = false;
  let ticker = null;
  let reread = null;
  let logText = "";
  let logRead = false;  // the whole log (an ended invocation's) has been read
  // The gateway's clock minus this browser's, from the instant the answer's cost was counted
  // to (`cost.as_of`): the timeline's phase under way and the cost's open phase both run to
  // the gateway's "now", so they read the same however far the two clocks are apart.
  let skew = 0;
  const now = () => Date.now() + skew;

  function fact(name, value) {
    return [el("dt", { text: name }), el("dd", { text: value ?? "–" })];
  }

  function draw() {
    summary.replaceChildren(
      ...fact("Function", `${inv.function} (version ${inv.spec_version})`),
      ...fact("State", inv.state),
      ...fact("Attempt", String(inv.attempt)),
      ...(inv.batch_id ? [el("dt", { text: "Batch" }), el("dd", {}, el("a", { id: "batch-link",
        href: `#/batches/${encodeURIComponent(inv.batch_id)}`, text: inv.batch_id }))] : []),
      ...fact("Accepted", when(inv.timeline.accepted)),
      ...fact("Time to start", seconds(inv.durations.time_to_start)),
      ...fact("Exit code", inv.exit_code === null ? null : String(inv.exit_code)),
      ...fact("Failure", inv.failure_reason),
      ...fact("Message", inv.message || null),
      ...fact("Node", inv.node),
      ...(inv.cluster ? fact("Cluster", inv.cluster) : []),  // several clusters only (MultiKueue)
      ...fact("GPU type", inv.gpu_type),
      ...(inv.queue_reason ? fact("Queue", `#${inv.queue_position}: ${inv.queue_reason}`) : []),
    );
    summary.dataset.state = inv.state;
    const at = now();
    const spans = phases(inv.timeline, at);
    const start = spans.length ? spans[0][1] : at;
    const total = Math.max(1, Math.max(start, ...spans.map((s) => s[2])) - start);
    waterfall.replaceChildren(...spans.map(([name, a, b]) => el("div", { class: "phase", "data-phase": name,
      "data-seconds": ((b - a) / 1000).toFixed(3) },
      el("span", { class: "label", text: name }),
      el("span", { class: "track" }, el("span", {
        class: `bar p-${name}`,
        style: { marginLeft: `${((a - start) / total) * 100}%`, width: `${Math.max(0.5, ((b - a) / total) * 100)}%` },
      })),
      el("span", { class: "value", text: seconds((b - a) / 1000) }))));
    waterfall.setAttribute("aria-label", `timeline: ${spans.map(([n, a, b]) => `${n} ${seconds((b - a) / 1000)}`).join(", ")}`);
    drawCost(inv.cost, inv.node_capacity, at);
    // No notes, no list (an empty one read as "1. none").
    notesHeading.hidden = notes.hidden = !inv.notes.length;
    notes.replaceChildren(...inv.notes.map((n) => el("li", {},
      el("time", { datetime: n.at, text: when(n.at) }), " ", el("strong", { text: n.kind }), ` ${n.message}`)));
    drawResult();
    cancel.hidden = TERMINAL.has(inv.state);
  }

  // The result; once it has ended without one, why: its state, failure reason, message and
  // the last lines of its output (the log below has the rest).
  function drawResult() {
    const ended = TERMINAL.has(inv.state);
    const has = inv.result !== null && inv.result !== undefined;
    result.dataset.outcome = has ? "result" : ended ? inv.state : "pending";
    const lines = [];
    if (ended && inv.state !== "succeeded") {
      const reason = inv.failure_reason ? ` (${inv.failure_reason.replaceAll("_", " ")})` : "";
      lines.push(`${inv.state.replaceAll("_", " ")}${reason}${inv.message ? `: ${inv.message}` : ""}`);
    }
    if (has) lines.push(preview(inv.result));
    else if (!ended) lines.push("(none yet: it has not ended)");
    else if (inv.state === "succeeded") lines.push("(it succeeded and handed back no result)");
    else if (inv.state !== "cancelled") {
      const tail = logText.trimEnd().split("\n").slice(-WHY_LINES).join("\n");
      lines.push(tail ? `No result. The last lines of its output:\n${tail}`
        : logRead ? "No result, and no output." : "No result. (Reading its output…)");
    } else lines.push("No result.");
    result.textContent = lines.join("\n");
  }

  // The node time it caused by phase (GET /v1/invocations/{id} `cost`); phases of no time are
  // left out, so a run on a warm slot reads as one line. `capacity`: what its current (or last)
  // attempt's node is priced as (spot, on-demand, local), null while no node is known.
  // While open, the phase under way grows from `as_of` to `at` as the timeline's does (the
  // dollars are those of `as_of`, read again every 10 s).
  function drawCost(c, capacity, at) {
    if (!c) { cost.replaceChildren(el("dd", { class: "muted", text: "not known" })); return; }
    const phase = c.open && c.as_of ? growing(inv.timeline) : null;
    const more = phase ? Math.max(0, at - Date.parse(c.as_of)) / 1000 : 0;
    const spent = Object.fromEntries(COST_PHASES.map(([p]) => [p, c.node_seconds[p] + (p === phase ? more : 0)]));
    cost.dataset.open = String(c.open);
    cost.replaceChildren(...COST_PHASES.filter(([p]) => spent[p] > 0).flatMap(([p, name]) => [el("dt", { text: name }),
      el("dd", { "data-phase": p, "data-seconds": spent[p].toFixed(3), text: seconds(spent[p]) })]),
    ...fact("Total", `${seconds(c.total_node_seconds + more)}${c.open ? " so far (under way)" : ""}`),
    ...fact("Cost", c.unpriced_node_seconds ? `${usd(c.usd)} + ${seconds(c.unpriced_node_seconds)} unpriced` : usd(c.usd)),
    el("dt", { text: "Node priced as" }), el("dd", { "data-capacity": capacity ?? "", text: capacity ?? "–" }));
  }

  async function load() {
    const asked = Date.now();
    inv = await api(`/v1/invocations/${encodeURIComponent(id)}`);
    if (inv.cost?.as_of) skew = Date.parse(inv.cost.as_of) - (asked + Date.now()) / 2;
    draw();
    loadWebhooks().catch(() => null);  // a view of its own: its failure leaves the page as it is
    if (!following && inv.state !== "queued" && inv.state !== "pending") followLogs();
    clearInterval(ticker);
    clearTimeout(reread);
    const live = !TERMINAL.has(inv.state);
    ticker = live ? setInterval(draw, 500) : null;  // bars under way grow
    reread = live ? setTimeout(() => load().catch(() => null), REREAD_MS) : null;
  }

  async function loadWebhooks() {
    const { items } = await api(`/v1/invocations/${encodeURIComponent(id)}/webhooks`);
    hooksHeading.hidden = hooksBox.hidden = !items.length;
    hooksBody.replaceChildren(...items.map((m) => el("tr", { "data-id": m.id, "data-delivered": String(!!m.delivered_at) },
      el("td", { text: m.type }),
      el("td", { text: String(m.attempts) }),
      el("td", { text: m.last_error || (m.last_status === null ? "–" : String(m.last_status)) }),
      el("td", { text: m.delivered_at ? when(m.delivered_at) : m.failed_at ? `failed ${when(m.failed_at)}` : "–" }),
      el("td", { text: m.next_attempt_at ? when(m.next_attempt_at) : "–" }))));
  }

  async function followLogs() {
    following = true;
    try {
      await stream(`/v1/invocations/${encodeURIComponent(id)}/logs?follow=${TERMINAL.has(inv.state) ? "false" : "true"}`,
        (chunk) => {
          logText = (logText + chunk).slice(-LOG_TAIL);
          logs.textContent = logText;
          logs.scrollTop = logs.scrollHeight;
        }, aborter.signal);
      if (!logText) logs.textContent = "(no output)";
    } catch (e) {
      if (e.name !== "AbortError") logs.textContent = `(logs: ${e.message})`;
    } finally {
      logRead = true;
      if (inv) drawResult();  // a failure's explanation quotes the output's end
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
  return () => { close(); aborter.abort(); clearInterval(ticker); clearTimeout(reread); };
}
