// Helpers of every page: no fetch; all but el and scroll pure (test_console_browser.py's
// test_the_pages_pure_helpers_agree_with_the_server runs them in the browser).
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "text") node.textContent = value;
    // Through the CSSOM: the page's Content-Security-Policy refuses style attributes.
    else if (key === "style") Object.assign(node.style, value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

// A wide table in a box of its own that scrolls sideways: a narrow screen scrolls the table,
// not the page (and never cuts it off).
export function scroll(table) {
  return el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": table.getAttribute("aria-label") || "table" }, table);
}

// What a backend runs for a spec: the local backend its command in its workdir (the image is
// the Kubernetes backend's alone), the Kubernetes backend its command in its image.
export function runs(spec, backend) {
  const command = (spec.command || []).join(" ") || "–";
  if (backend === "local") return `${command}  (in ${spec.workdir || "the gateway's working directory"})`;
  return `${command}  (in image ${spec.image})`;
}

export function seconds(value) {
  if (value === null || value === undefined) return "–";
  if (value < 1) return `${Math.round(value * 1000)} ms`;
  if (value < 120) return `${value.toFixed(1)} s`;
  if (value < 7200) return `${(value / 60).toFixed(1)} min`;
  return `${(value / 3600).toFixed(1)} h`;
}

// A time as "2026-12-06 09:50:26 UTC": the browser's zone, always named (a bare "9:50 AM"
// is read in the reader's zone, which need not be the browser's nor the gateway's).
const ZONE_PARTS = new Intl.DateTimeFormat("en-GB", {
  year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
  second: "2-digit", hourCycle: "h23", timeZoneName: "short" });

function zoned(ms) {
  const p = Object.fromEntries(ZONE_PARTS.formatToParts(new Date(ms)).map((x) => [x.type, x.value]));
  return { date: `${p.year}-${p.month}-${p.day}`, time: `${p.hour}:${p.minute}:${p.second}`, zone: p.timeZoneName };
}

export function when(iso) {
  if (!iso) return "–";
  const z = zoned(typeof iso === "number" ? iso : Date.parse(iso));
  return `${z.date} ${z.time} ${z.zone}`;
}

// The time of day with its zone ("09:50:26 UTC"): a chart's axis within one day.
export function clock(ms) {
  const z = zoned(ms);
  return `${z.time} ${z.zone}`;
}

// The browser's zone as the page names it ("UTC", "GMT+1"): what a datetime-local field means.
export function zoneName() {
  return zoned(Date.now()).zone;
}

// Round numbers for a chart's axis from 0 to at least `top`: steps of 1, 2 or 5 x 10^n, about
// `count` of them; whole numbers only when `whole` (GPUs and invocations come in ones).
export function ticks(top, count = 4, whole = true) {
  const most = Math.max(top, whole ? 1 : Number.EPSILON);
  const raw = most / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  let step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
  if (whole) step = Math.max(1, Math.round(step));
  const out = [];
  for (let v = 0; v < most + step - 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

// Invocations per time bucket, from a list of them (GET /v1/invocations items): how many were
// accepted in each bucket, how many of those failed (failed or timed out), and the p95 time to
// start of those that started. `since` and `step` in ms; buckets [since + i*step, + step).
export function series(items, since, until, step) {
  const n = Math.max(1, Math.ceil((until - since) / step));
  const out = Array.from({ length: n }, (_, i) => ({ start: since + i * step, invocations: 0, failures: 0, starts: [] }));
  for (const inv of items) {
    const i = Math.floor((Date.parse(inv.timeline.accepted) - since) / step);
    if (i < 0 || i >= n) continue;
    out[i].invocations += 1;
    if (inv.state === "failed" || inv.state === "timed_out") out[i].failures += 1;
    if (inv.durations.time_to_start !== null) out[i].starts.push(inv.durations.time_to_start);
  }
  return out.map(({ starts, ...b }) => ({ ...b, p95Start: percentile(starts, 95) }));
}

export const TERMINAL = new Set(["succeeded", "failed", "cancelled", "timed_out"]);
export const STATES = ["queued", "pending", "running", "succeeded", "failed", "cancelled", "timed_out"];

// The phases of an invocation's time as the gateway splits them (`timeline.phases`, from
// domain/wait_phases.py, the rule `eops status` follows too: through Kueue the wait after
// dispatch is `kueue` then `capacity`), as [name, start, end] in ms since the epoch; the one
// under way ends at the invocation's end, or `now` while it lives.
export function phases(timeline, now) {
  const finished = timeline.finished ? Date.parse(timeline.finished) : null;
  return (timeline.phases ?? []).map((p) => {
    const start = Date.parse(p.start);
    const end = p.end ? Date.parse(p.end) : (finished ?? now);
    return [p.name, start, Math.max(start, end)];
  });
}

export function percentile(values, p) {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

// Success rate over those that ended, and p95 time-to-start over those that started.
export function functionStats(items) {
  const ended = items.filter((i) => TERMINAL.has(i.state));
  const ok = ended.filter((i) => i.state === "succeeded").length;
  const starts = items.map((i) => i.durations.time_to_start).filter((v) => v !== null);
  return {
    count: items.length,
    ended: ended.length,
    successRate: ended.length ? ok / ended.length : null,
    p95Start: percentile(starts, 95),
  };
}

// Invocation ids are time-ordered (48-bit milliseconds, then random bits, Crockford base32):
// every id accepted before `ms` sorts below this one, so it is a keyset cursor for a time.
const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";
export function cursorBefore(ms) {
  let number = BigInt(Math.max(0, Math.floor(ms))) << 80n;
  let text = "";
  for (let i = 0; i < 26; i++) {
    text = ALPHABET[Number(number & 31n)] + text;
    number >>= 5n;
  }
  return `inv-${text}`;
}

export function preview(result, limit = 2000) {
  if (result === null || result === undefined) return "";
  const text = typeof result === "string" ? result : JSON.stringify(result, null, 2);
  return text.length > limit ? `${text.slice(0, limit)}\n… (${text.length - limit} more characters)` : text;
}

// The phases of node time (domain/node_seconds.py Phase), in the order they happen, and how
// the page names them.
export const COST_PHASES = [["provisioning", "provisioning"], ["idle_before_start", "idle before start"],
  ["run", "run"], ["idle_after", "idle after"], ["warm_unused", "warm, not used"],
  ["run_again", "run again elsewhere"]];

// The phases a report shows: every phase of a node's life, and run_again (MultiKueue's second
// runs) only where a group has any, as `eops cost` does.
export function shownPhases(groups) {
  const again = groups.some((g) => (g.node_seconds.run_again || 0) > 0);
  return COST_PHASES.filter(([p]) => p !== "run_again" || again);
}

// GET /v1/cost's groups (by function, hour, capacity and cluster) summed over one key
// ("function", "hour", "capacity" or "cluster"):
// [{key, node_seconds: {phase: s}, total, usd, unpriced}] in the key's order.
export function costBy(groups, key) {
  const out = new Map();
  for (const g of groups) {
    const k = g[key] ?? "";
    let row = out.get(k);
    if (!row) {
      row = { key: k, node_seconds: Object.fromEntries(COST_PHASES.map(([p]) => [p, 0])), total: 0, usd: 0, unpriced: 0 };
      out.set(k, row);
    }
    for (const [p] of COST_PHASES) row.node_seconds[p] += g.node_seconds[p] ?? 0;
    row.total += g.total_node_seconds;
    row.usd += g.usd;
    row.unpriced += g.unpriced_node_seconds ?? 0;
  }
  return [...out.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

// The starts of the hours from the one holding `since` to the one holding `until`, in ms:
// the chart's slots, hours without node time included, so its x axis is time.
export function hourSlots(since, until) {
  const hour = 3600 * 1000;
  const first = Math.floor(Date.parse(since) / hour) * hour;
  const out = [];
  for (let t = first; t <= Date.parse(until); t += hour) out.push(t);
  return out;
}

export function usd(value) {
  if (value > 0 && value < 0.0001) return "< $0.0001";  // not "$0.0000" for time that was charged
  return value >= 0.01 || value === 0 ? `$${value.toFixed(2)}` : `$${value.toFixed(4)}`;
}
