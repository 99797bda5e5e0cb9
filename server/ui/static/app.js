// The dashboard: sign in with an admin key, pick a namespace, then read the
// entities, limits, live buckets, usage, reservations, leases and audit log
// through the API. It only ever sends GET.

import { session, get, getAll, seg, APIError } from "./api.js";
import { $, el, show } from "./dom.js";
import * as view from "./views.js";

const pollMS = 3000;
const hourMS = 3600000, dayMS = 86400000;

const state = {
  entities: [],
  configs: [],
  selected: "",
  resource: "",
  usageWhat: "",
  timer: 0,
  polling: false,
};

function status(err) {
  $("status").textContent = err ? `Could not read the API: ${err.message}` : "";
  show("status", !!err);
  if (err instanceof APIError && (err.status === 401 || err.status === 403)) signOut(err);
}

function loginMessage(err) {
  if (err.status === 401) return `The server does not know this key (${err.message}).`;
  if (err.status === 403) return `This key may not open the dashboard: it needs role admin (${err.message}).`;
  return `Sign-in failed: ${err.message}`;
}

function showLogin(err) {
  clearInterval(state.timer);
  show("dash", false);
  show("logout", false);
  show("refresh", false);
  show("ns-label", false);
  $("who").textContent = "";
  show("login", true);
  $("login-error").textContent = err ? loginMessage(err) : "";
  show("login-error", !!err);
  $("key").focus();
}

function signOut(err) {
  session.setKey("");
  session.namespace = "";
  showLogin(err);
}

async function signIn() {
  let s;
  try {
    s = await get("/ui/session");
  } catch (err) {
    if (session.key || err.status !== 401) {
      session.setKey("");
      showLogin(err);
    } else {
      showLogin(); // keys are required: ask for one
    }
    return;
  }
  show("login", false);
  show("login-error", false);
  show("dash", true);
  show("refresh", true);
  show("logout", s.keys_required);
  $("who").textContent = s.keys_required ? `signed in as ${s.principal}` : "server without keys";
  await namespaces(s);
  await loadAll();
}

async function namespaces(s) {
  let names = [s.namespace];
  if (s.all_namespaces) {
    try {
      const r = await get("/v1/namespaces");
      const live = (r.namespaces || []).filter((n) => !n.deleted_at_ms).map((n) => n.name);
      if (live.length) names = live.includes(s.namespace) ? live : [s.namespace, ...live];
    } catch {
      // A store without a namespace registry: the key's namespace alone.
    }
  }
  session.namespace = names.includes(session.namespace) ? session.namespace : s.namespace;
  $("ns").replaceChildren(...names.map((n) => el("option", { value: n, selected: n === session.namespace }, n)));
  $("ns").disabled = names.length < 2;
  show("ns-label", true);
}

async function loadAll() {
  try {
    const [entities, configs] = await Promise.all([
      getAll("/v1/entities", { limit: 1000 }, "entities"),
      getAll("/v1/limits", { limit: 1000 }, "configs"),
    ]);
    state.entities = entities;
    state.configs = configs;
    status(null);
  } catch (err) {
    status(err);
    return;
  }
  view.limits(state.configs);
  await deniedMost();
  if (!state.entities.some((e) => e.id === state.selected)) {
    const root = state.entities.find((e) => !e.parent_id) || state.entities[0];
    state.selected = root ? root.id : "";
    state.resource = "";
  }
  drawTree();
  await select(state.selected);
}

/** deniedMost shows the entities refused most, or hides the panel from a key that may not read them. */
async function deniedMost() {
  try {
    const r = await get("/v1/metrics/top-denied", { n: 20 });
    view.denied(r.entities || []);
    show("denied-panel", true);
  } catch {
    show("denied-panel", false);
  }
}

function drawTree() {
  view.tree(state.entities, state.configs, state.selected, (id) => {
    state.resource = "";
    select(id);
  });
}

/** resourcesOf lists the resources whose limits reach entity id. */
function resourcesOf(id) {
  const mine = [], others = [];
  for (const c of state.configs) {
    if (!c.resource || c.resource === view.defaultResource) continue;
    (c.entity === id ? mine : others).push(c.resource);
  }
  return [...new Set([...mine, ...others])];
}

async function select(id) {
  clearInterval(state.timer);
  state.selected = id;
  for (const b of $("tree").querySelectorAll("button.entity")) {
    b.classList.toggle("selected", b.dataset.entity === id);
  }
  show("entity-none", !id);
  show("entity-body", !!id);
  $("entity-title").textContent = id;
  await loadAudit();
  if (!id) return;
  const resources = resourcesOf(id);
  $("resources").replaceChildren(...resources.map((r) => el("option", { value: r })));
  if (!state.resource) state.resource = resources[0] || "";
  $("resource").value = state.resource;
  try {
    view.entityInfo(await get(`/v1/entities/${seg(id)}`), state.configs);
  } catch (err) {
    status(err);
    return;
  }
  await Promise.all([refreshBuckets(), loadUsage(), loadReservations(), loadLeases()]);
  state.timer = setInterval(poll, pollMS);
}

async function poll() {
  if (state.polling || document.hidden) return;
  state.polling = true;
  try {
    await refreshBuckets();
  } finally {
    state.polling = false;
  }
}

async function refreshBuckets() {
  const entity = state.selected, resource = state.resource;
  if (!resource) {
    view.buckets([], "Name a resource to see the buckets.");
    return;
  }
  try {
    const r = await get("/v1/available", { entity, resource });
    // A status says how much is there, not how long until more is: ask,
    // per limit that some bucket has run out of, how long until one unit
    // of it could be acquired (its retry-after).
    const out = r.limits.filter((s) => s.available < 1).map((s) => s.limit);
    const waits = new Map(await Promise.all([...new Set(out)].map(async (name) => {
      const w = await get("/v1/available", { entity, resource, consume: `${name}:1` });
      return [name, w.retry_after_ms || 0];
    })));
    if (entity !== state.selected || resource !== state.resource) return; // moved on meanwhile
    for (const s of r.limits) {
      if (s.available < 1) s.retry_after_ms = Math.max(s.retry_after_ms || 0, waits.get(s.limit) || 0);
    }
    view.buckets(r.limits, r.limits.length ? "" : "No limits apply to this entity and resource.");
  } catch (err) {
    if (err instanceof APIError && (err.status === 401 || err.status === 403)) status(err);
    else view.buckets([], `Could not read the buckets: ${err.message}`);
  }
}

async function loadUsage() {
  const win = $("usage-window").value;
  const windowMS = win === "day" ? dayMS : hourMS;
  const to = Date.now();
  const from = to - (win === "day" ? 30 * dayMS : 24 * hourMS);
  try {
    const rows = await getAll("/v1/usage", { entity: state.selected, window: win, from, to }, "usage");
    state.usageWhat = view.usage(rows, from, to, windowMS, state.usageWhat);
  } catch (err) {
    $("usage-chart").replaceChildren(el("p", { class: "error" }, `Could not read the usage: ${err.message}`));
  }
}

async function loadLeases() {
  try {
    view.leases(await getAll("/v1/leases", { entity: state.selected, limit: 1000 }, "leases"));
  } catch (err) {
    status(err);
  }
}

async function loadReservations() {
  try {
    view.reservations(await getAll("/v1/reservations", { entity: state.selected, limit: 1000 }, "reservations"));
  } catch (err) {
    status(err);
  }
}

async function loadAudit() {
  const entity = $("audit-scope").value === "entity" ? state.selected : "";
  try {
    const events = await getAll("/v1/audit", { entity, limit: 1000 }, "events", 5);
    view.audit(events.slice(-100), entity ? `of ${entity}` : "of the system and resources");
  } catch (err) {
    status(err);
  }
}

function wire() {
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    session.setKey($("key").value.trim());
    $("key").value = "";
    signIn();
  });
  $("logout").addEventListener("click", () => signOut());
  $("refresh").addEventListener("click", () => {
    loadAll();
  });
  $("ns").addEventListener("change", () => {
    session.namespace = $("ns").value;
    state.selected = "";
    loadAll();
  });
  $("resource-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.resource = $("resource").value.trim();
    refreshBuckets();
  });
  $("usage-window").addEventListener("change", loadUsage);
  $("usage-limit").addEventListener("change", () => {
    state.usageWhat = $("usage-limit").value;
    loadUsage();
  });
  $("audit-scope").addEventListener("change", loadAudit);
  $("lease-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      view.lease(await get(`/v1/leases/${seg($("lease-id").value.trim())}`));
    } catch (err) {
      view.lease(null, err);
    }
  });
}

wire();
signIn();
