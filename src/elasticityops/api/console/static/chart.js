// Plain SVG charts for the pages (no library): bars per time bucket with a y axis of round
// numbers, drawn at the width they are shown at, so their text is never scaled down.
import { clock, ticks } from "./format.js";

export const SVG = "http://www.w3.org/2000/svg";

export function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

// Gridlines and labels at round values from 0 to the top tick; returns y(value) and the top.
export function yAxis(root, box, top, label = String, whole = true) {
  const marks = ticks(top, 4, whole);
  const most = marks[marks.length - 1];
  const y = (v) => box.bottom - (v / most) * (box.bottom - box.top);
  for (const v of marks) {
    root.append(svg("line", { x1: box.left, y1: y(v), x2: box.right, y2: y(v), class: v === 0 ? "axis" : "grid" }),
      svg("text", { x: box.left - 6, y: y(v) + 4, class: "tick y-tick", "text-anchor": "end" }, v === 0 ? "0" : label(v)));
  }
  return y;
}

// One bar per bucket ({start, value}); `step` in ms; `format` writes a value for its title.
export function bars(buckets, { name, step, width, height = 150, format = String, whole = true }) {
  const box = { left: 52, right: width - 8, top: 10, bottom: height - 24 };
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, class: "chart series", role: "img",
    "data-series": name });
  const values = buckets.map((b) => b.value ?? 0);
  const y = yAxis(root, box, Math.max(whole ? 1 : 0.001, ...values), whole ? String : format, whole);
  const slot = (box.right - box.left) / Math.max(1, buckets.length);
  buckets.forEach((b, i) => {
    if (b.value === null || b.value === undefined) return;
    const rect = svg("rect", { x: box.left + i * slot + slot * 0.15, y: y(b.value), width: Math.max(1, slot * 0.7),
      height: Math.max(b.value > 0 ? 1 : 0, box.bottom - y(b.value)), class: `bar-${name}`,
      "data-start": new Date(b.start).toISOString(), "data-value": String(b.value) });
    rect.append(svg("title", {}, `${clock(b.start)}: ${format(b.value)}`));
    root.append(rect);
  });
  const first = buckets[0]?.start, last = buckets.length ? buckets[buckets.length - 1].start + step : null;
  if (first !== undefined) {
    root.append(svg("text", { x: box.left, y: height - 6, class: "tick" }, clock(first)),
      svg("text", { x: box.right, y: height - 6, class: "tick", "text-anchor": "end" }, clock(last)));
  }
  root.setAttribute("aria-label", `${name} per ${Math.round(step / 60000)} min from ${clock(first)}: ` +
    buckets.map((b) => (b.value === null ? "–" : format(b.value))).join(", "));
  return root;
}

// The width a chart in `container` is drawn at (its content box), never under 280 px.
export function widthOf(container) {
  const style = getComputedStyle(container);
  return Math.max(280, Math.floor(container.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)));
}
