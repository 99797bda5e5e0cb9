// The dashboard's panels, each drawn from API answers.

import { $, el, row, fillRows, show, time, duration, num } from "./dom.js";
import { fillBar, usageChart } from "./chart.js";

/** defaultResource is the resource of an entity's limits for any resource. */
export const defaultResource = "_default_";

/** limitsText is a config's limits (api Limits) as one line, those in shadow marked, then its alert thresholds. */
function limitsText(c) {
  const shadow = new Set(c.shadow || []);
  const name = (l) => l.slice(0, l.indexOf(":"));
  const text = c.limits && c.limits.length ? c.limits.map((l) => (shadow.has(name(l)) ? `${l} (shadow)` : l)).join(", ") : "(none)";
  const alerts = (c.alert_at || []).map((t) => `${Math.round(t * 1000) / 10}%`);
  return alerts.length ? `${text}; alerts at ${alerts.join(", ")}` : text;
}

/**
 * tree draws the entities under their parents; configs are the namespace's
 * stored limits, shown beside the entities they are set on. onSelect is
 * called with an entity's id when it is clicked.
 */
export function tree(entities, configs, selected, onSelect) {
  const byParent = new Map();
  const ids = new Set(entities.map((e) => e.id));
  for (const e of entities) {
    const parent = e.parent_id && ids.has(e.parent_id) ? e.parent_id : "";
    if (!byParent.has(parent)) byParent.set(parent, []);
    byParent.get(parent).push(e);
  }
  const limitsOf = new Map();
  for (const c of configs) {
    if (!c.entity) continue;
    if (!limitsOf.has(c.entity)) limitsOf.set(c.entity, []);
    const where = c.resource === defaultResource ? "any resource" : c.resource;
    limitsOf.get(c.entity).push(`${where}: ${limitsText(c)}`);
  }
  const branch = (parent, depth) => {
    const kids = byParent.get(parent) || [];
    return kids.map((e) => {
      const btn = el("button", { type: "button", class: "entity" + (e.id === selected ? " selected" : ""),
        "data-entity": e.id }, e.id);
      btn.addEventListener("click", () => onSelect(e.id));
      const sub = depth < 32 ? branch(e.id, depth + 1) : [];
      return el("li", { "data-entity": e.id },
        btn,
        e.name ? el("span", { class: "name" }, e.name) : null,
        e.cascade ? el("span", { class: "tag", title: "its acquires also count against its parent" }, "cascade") : null,
        ...(limitsOf.get(e.id) || []).map((t) => el("span", { class: "limits mono" }, t)),
        sub.length ? el("ul", null, ...sub) : null);
    });
  };
  $("tree").replaceChildren(...branch("", 0));
  show("tree-empty", entities.length === 0);
}

/** entityInfo draws the entity's fields and the limits set on it. */
export function entityInfo(e, configs) {
  $("entity-title").textContent = e.id;
  const md = Object.entries(e.metadata || {}).map(([k, v]) => `${k}=${v}`).join(", ");
  const dl = $("entity-info");
  dl.replaceChildren();
  const add = (k, v) => dl.append(el("dt", null, k), el("dd", null, v));
  add("Name", e.name || "—");
  add("Parent", e.parent_id || "—");
  add("Cascade", e.cascade ? "yes: its acquires also count against its parent" : "no");
  add("Metadata", md || "—");
  add("Created", time(e.created_at_ms));
  const mine = configs.filter((c) => c.entity === e.id);
  fillRows("entity-limits", mine.length
    ? mine.map((c) => row(c.resource === defaultResource ? "any resource" : c.resource, el("span", { class: "mono" }, limitsText(c))))
    : [row("—", "none set on it: the resource's limits apply")]);
}

/**
 * resets says when a calendar quota's window ends and it refills (its
 * status's resets_at_ms), in local time, UTC in the tooltip; nothing for
 * other limits.
 */
function resets(ms) {
  if (!ms) return null;
  return el("span", { class: "resets muted", title: new Date(ms).toISOString() }, `resets ${time(ms)}`);
}

/** buckets draws live bucket statuses (api LimitStatus). */
export function buckets(statuses, note) {
  $("buckets-note").textContent = note || "";
  show("buckets-note", !!note);
  fillRows("buckets", statuses.map((s) => {
    const r = row(
      el("span", { class: "mono" }, `${s.entity} / ${s.resource}`),
      el("span", { class: "mono" }, s.limit),
      s.kind,
      fillBar(s.available, s.capacity),
      `${num(s.available)} / ${num(s.capacity)}`,
      [el("span", { class: "retry" + (s.retry_after_ms > 0 ? " waiting" : "") }, s.retry_after_ms > 0 ? duration(s.retry_after_ms) : "now"),
        resets(s.resets_at_ms)]);
    r.setAttribute("data-limit", s.limit);
    r.setAttribute("data-bucket", `${s.entity}/${s.resource}`);
    return r;
  }));
  $("buckets-updated").textContent = `Updated ${time(Date.now())}`;
}

/**
 * usage draws the usage rows (api Usage) of [from, to) per window as bars
 * of what (a limit's name, or "events"), and fills the limit picker.
 */
export function usage(rows, from, to, windowMS, what) {
  const names = new Set();
  for (const u of rows) for (const k of Object.keys(u.consumed || {})) names.add(k);
  const pick = $("usage-limit");
  const options = ["events", ...[...names].sort()];
  if (!options.includes(what)) what = options.length > 1 ? options[1] : "events";
  pick.replaceChildren(...options.map((n) => el("option", { value: n, selected: n === what }, n === "events" ? "acquires (events)" : n)));
  const first = Math.ceil(from / windowMS) * windowMS;
  const slots = [];
  for (let t = first; t < to; t += windowMS) slots.push(t);
  const values = slots.map(() => 0);
  for (const u of rows) {
    const i = slots.indexOf(u.start_ms);
    if (i < 0) continue;
    values[i] += what === "events" ? u.events : (u.consumed || {})[what] || 0;
  }
  $("usage-chart").replaceChildren(usageChart(slots, values, windowMS, what),
    el("p", { class: "muted" }, rows.length ? `Total ${num(values.reduce((a, b) => a + b, 0))} ${what}.`
      : "No usage recorded in this period (usage appears once the aggregator has written it)."));
  return what;
}

/** reservations draws reservations (api Reservation). */
export function reservations(list) {
  fillRows("reservations", list.map((r) => row(el("span", { class: "mono" }, r.id), r.resource, r.holder || "—",
    time(r.created_at_ms), r.expires_at_ms ? time(r.expires_at_ms) : "never")));
  show("reservations-empty", list.length === 0);
}

/** leases draws open durable leases (api LeaseInfo). */
export function leases(list) {
  fillRows("leases", list.map((l) => row(el("span", { class: "mono" }, l.lease_id), l.resource, l.holder || "—",
    consumedText(l.consumed), l.expires_at_ms ? time(l.expires_at_ms) : "never")));
  show("leases-empty", list.length === 0);
}

/** consumedText writes amounts per limit, e.g. "rpm: 1, tpm: 500". */
function consumedText(consumed) {
  return Object.entries(consumed || {}).map(([k, v]) => `${k}: ${num(v)}`).join(", ") || "—";
}

/** limits draws every stored config of the namespace (api ScopedLimits). */
export function limits(configs) {
  fillRows("limits", configs.map((c) => {
    const scope = c.entity ? "entity" : c.resource ? "resource" : "system";
    const res = c.entity && c.resource === defaultResource ? "any" : c.resource || "—";
    return row(scope, c.entity || "—", res, el("span", { class: "mono" }, limitsText(c)), c.on_unavailable || "—");
  }));
}

/**
 * denied draws the entities refused most (api DeniedEntity), most first: a
 * count that may be over says so ("at most").
 */
export function denied(list) {
  fillRows("denied", list.map((d) => row(d.entity, d.resource, d.limit,
    d.error ? `${num(d.count - d.error)} to ${num(d.count)}` : num(d.count))));
  show("denied-empty", list.length === 0);
}

/** audit draws audit events (api AuditEvent), newest first. */
export function audit(events, of) {
  $("audit-of").textContent = of;
  fillRows("audit", events.slice().reverse().map((e) => {
    const details = Object.entries(e.details || {}).map(([k, v]) => `${k}=${v}`).join(" ");
    return row(time(e.time_ms), e.action, e.entity || "—", e.resource || "—", e.principal || "—",
      el("span", { class: "mono" }, details));
  }));
  show("audit-empty", events.length === 0);
}

/** lease draws a lease (api LeaseResponse), or the error looking it up. */
export function lease(l, err) {
  const dl = $("lease");
  dl.replaceChildren();
  const add = (k, v) => dl.append(el("dt", null, k), el("dd", null, v));
  if (err) {
    add("Error", err.message);
    return;
  }
  add("Id", el("span", { class: "mono" }, l.lease_id));
  add("State", l.state);
  add("Entity", l.entity || "—");
  add("Resource", l.resource || "—");
  add("Consumed", consumedText(l.consumed));
  add("Expires", l.expires_at_ms ? `${time(l.expires_at_ms)} (in ${duration(l.expires_at_ms - Date.now())})` : "never");
}
