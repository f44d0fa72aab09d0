// Pure helpers: no DOM, no fetch (tests/console/test_format.py runs them in the browser).
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

export function seconds(value) {
  if (value === null || value === undefined) return "–";
  if (value < 1) return `${Math.round(value * 1000)} ms`;
  if (value < 120) return `${value.toFixed(1)} s`;
  if (value < 7200) return `${(value / 60).toFixed(1)} min`;
  return `${(value / 3600).toFixed(1)} h`;
}

export function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "–";
}

export const TERMINAL = new Set(["succeeded", "failed", "cancelled", "timed_out"]);
export const STATES = ["queued", "pending", "running", "succeeded", "failed", "cancelled", "timed_out"];

// The phases of an invocation's time (domain/invocations.py Timeline.durations), as
// [name, start, end] in ms since the epoch; a phase under way ends `now`.
export function phases(timeline, now) {
  const t = (iso) => (iso ? Date.parse(iso) : null);
  const marks = [t(timeline.accepted), t(timeline.dispatched), t(timeline.capacity_ready),
    t(timeline.started), t(timeline.finished)];
  const names = ["queue", "capacity", "start", "run"];
  const out = [];
  for (let i = 0; i < names.length; i++) {
    if (marks[i] === null) break;
    const end = marks[i + 1] ?? (marks[4] ?? now);
    out.push([names[i], marks[i], Math.max(marks[i], end)]);
    if (marks[i + 1] === null) break;
  }
  return out;
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
  ["run", "run"], ["idle_after", "idle after"], ["warm_unused", "warm, not used"]];

// GET /v1/cost's groups (by function, hour and capacity) summed over one key ("function",
// "hour" or "capacity"):
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
