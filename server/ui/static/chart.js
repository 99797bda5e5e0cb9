// Inline SVG drawings: a bucket's fill bar and the usage bar chart. Sizes
// are attributes, never style, so the page's CSP (no inline style) holds.

import { svg, num, time } from "./dom.js";

/** fillBar draws available/capacity as a bar. */
export function fillBar(available, capacity) {
  const w = 160, h = 14;
  const frac = capacity > 0 ? Math.max(0, Math.min(1, available / capacity)) : 0;
  const level = frac < 0.1 ? "low" : frac < 0.5 ? "mid" : "high";
  return svg("svg", { class: "fill", width: w, height: h, viewBox: `0 0 ${w} ${h}`, role: "img",
    "aria-label": `${Math.round(frac * 100)}% available`, "data-fill": frac.toFixed(3) },
    svg("rect", { class: "fill-bg", x: 0, y: 0, width: w, height: h, rx: 3 }),
    svg("rect", { class: `fill-fg ${level}`, x: 0, y: 0, width: (w * frac).toFixed(1), height: h, rx: 3 }),
    svg("title", null, `${num(available)} of ${num(capacity)} available`));
}

/**
 * usageChart draws one bar per window: slots are the windows' start times
 * (Unix ms), values the amount in each.
 */
export function usageChart(slots, values, windowMS, label) {
  const w = 720, h = 220, left = 56, right = 8, top = 12, bottom = 32;
  const plotW = w - left - right, plotH = h - top - bottom;
  const peak = Math.max(0, ...values);
  const scale = peak > 0 ? plotH / peak : 0;
  const bw = plotW / slots.length;
  const root = svg("svg", { class: "usage", width: w, height: h, viewBox: `0 0 ${w} ${h}`, role: "img",
    "aria-label": `${label} per window` });
  root.append(svg("line", { class: "axis", x1: left, y1: top + plotH, x2: w - right, y2: top + plotH }));
  root.append(svg("line", { class: "axis", x1: left, y1: top, x2: left, y2: top + plotH }));
  root.append(svg("text", { class: "tick", x: left - 6, y: top + 10, "text-anchor": "end" }, num(peak)));
  root.append(svg("text", { class: "tick", x: left - 6, y: top + plotH, "text-anchor": "end" }, "0"));
  slots.forEach((start, i) => {
    const v = values[i];
    const bh = v * scale;
    const bar = svg("rect", { class: "bar", x: (left + i * bw + 1).toFixed(1), y: (top + plotH - bh).toFixed(1),
      width: Math.max(1, bw - 2).toFixed(1), height: bh.toFixed(1), "data-value": v },
      svg("title", null, `${time(start)}: ${num(v)} ${label}`));
    root.append(bar);
  });
  const tickEvery = Math.max(1, Math.ceil(slots.length / 6));
  slots.forEach((start, i) => {
    if (i % tickEvery !== 0) return;
    const d = new Date(start);
    const p = (n) => String(n).padStart(2, "0");
    const text = windowMS < 86400000 ? `${p(d.getHours())}:00` : `${d.getMonth() + 1}/${d.getDate()}`;
    root.append(svg("text", { class: "tick", x: (left + i * bw + bw / 2).toFixed(1), y: h - bottom + 16, "text-anchor": "middle" }, text));
  });
  return root;
}
