// The live page of the sheafalloc control plane: polls GET /v1/caches,
// shows each cache's rates over the refresh interval, and changes a sheaf
// capacity with PUT /v1/caches/{name}/sheaf_capacity. Same origin only,
// no dependencies; every figure is written with textContent.
"use strict";

(() => {
  const TOKEN_KEY = "sheafalloc-control-token";
  const SLOW_SHARE_HOT = 0.05;
  const BARN_HITS_LOW = 0.5;

  const $ = (id) => document.getElementById(id);
  // Set first: a page whose script does not even parse never shows it.
  document.body.dataset.script = "running";

  // Script failures are shown on the page (and counted on <body>), so
  // neither a reader nor the browser test can miss them.
  const failures = [];
  function reportFailure(message) {
    failures.push(message);
    const box = $("errors");
    box.hidden = false;
    box.textContent = failures.join("\n");
    document.body.dataset.errors = String(failures.length);
  }
  window.addEventListener("error", (event) => {
    reportFailure(`script error: ${event.message} (${event.filename}:${event.lineno})`);
  });
  window.addEventListener("unhandledrejection", (event) => {
    reportFailure(`unhandled rejection: ${event.reason}`);
  });

  const state = {
    previous: null, // the last /v1/caches answer, by cache name
    previousAt: 0,
    latest: new Map(), // name -> cache of the last answer
    refreshes: 0,
    timer: 0,
    token: readToken(),
  };

  function readToken() {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || "";
    } catch (_) {
      return "";
    }
  }

  function saveToken(token) {
    state.token = token;
    try {
      sessionStorage.setItem(TOKEN_KEY, token);
    } catch (_) {
      // Storage refused (private mode): the token lives in this page only.
    }
  }

  function headers(withBody) {
    const result = { accept: "application/json" };
    if (withBody) result["content-type"] = "application/json";
    if (state.token) result.authorization = `Bearer ${state.token}`;
    return result;
  }

  // ---- formatting -------------------------------------------------------

  function bytes(value) {
    if (value === null || value === undefined || !Number.isFinite(value)) return "\u2013";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let scaled = Math.max(0, value);
    let unit = 0;
    while (scaled >= 1024 && unit < units.length - 1) {
      scaled /= 1024;
      unit += 1;
    }
    return unit === 0 ? `${scaled} B` : `${scaled.toFixed(1)} ${units[unit]}`;
  }

  function rate(value) {
    if (value === null || !Number.isFinite(value)) return "\u2013";
    if (value >= 1e9) return `${(value / 1e9).toFixed(2)}G`;
    if (value >= 1e6) return `${(value / 1e6).toFixed(2)}M`;
    if (value >= 1e4) return `${(value / 1e3).toFixed(1)}k`;
    return value.toFixed(0);
  }

  function percent(share) {
    if (share === null || !Number.isFinite(share)) return "\u2013";
    return `${(share * 100).toFixed(1)}%`;
  }

  function share(part, whole) {
    return whole > 0 ? part / whole : null;
  }

  // ---- figures ----------------------------------------------------------

  // What one row shows: rates and shares over the interval when there is
  // a previous answer, else since start (`cumulative`).
  function figures(cache, before, seconds) {
    const cumulative = !before || !(seconds > 0);
    const delta = (field) => {
      const now = Number(cache[field] || 0);
      if (cumulative) return now;
      const diff = now - Number(before[field] || 0);
      return diff >= 0 ? diff : now; // counters restarted: count from zero
    };
    const allocations = delta("allocations");
    const frees = delta("frees");
    const slow = delta("slow_path_allocs");
    const hits = delta("barn_get_hits");
    const misses = delta("barn_get_misses");
    const held = Number(cache.bytes_held || 0);
    const live = Math.max(0, Number(cache.live_bytes || 0));
    return {
      cumulative,
      allocations,
      slow,
      allocRate: cumulative ? null : allocations / seconds,
      freeRate: cumulative ? null : frees / seconds,
      slowShare: share(slow, allocations),
      barnHits: share(hits, hits + misses),
      live,
      held,
      liveShare: share(live, held),
      tuning: Object.prototype.hasOwnProperty.call(cache, "tuning") ? String(cache.tuning) : null,
    };
  }

  function inUse(cache) {
    const min = cache.sheaf_capacity_in_use_min;
    const max = cache.sheaf_capacity_in_use_max;
    if (!max) return "\u2013";
    return min === max ? String(max) : `${min}\u2013${max}`;
  }

  function isUsed(cache) {
    return cache.allocations > 0 || cache.slabs > 0 || cache.bytes_held > 0;
  }

  // ---- rendering --------------------------------------------------------

  function cell(row, field, text, options = {}) {
    const td = document.createElement("td");
    td.dataset.field = field;
    td.textContent = text;
    if (options.title) td.title = options.title;
    if (options.className) td.className = options.className;
    row.appendChild(td);
    return td;
  }

  function buildRow(cache, f) {
    const row = document.createElement("tr");
    row.dataset.cache = cache.name;
    const since = f.cumulative ? "since start" : "over the interval";
    const italic = f.cumulative ? "cumulative" : "";
    cell(row, "name", cache.name, { title: `${cache.object_size}-byte objects` });
    cell(row, "alloc-rate", rate(f.allocRate), { className: "number" });
    cell(row, "free-rate", rate(f.freeRate), { className: "number" });
    const hot = f.slowShare !== null && f.slowShare > SLOW_SHARE_HOT ? " hot" : "";
    cell(row, "slow-share", percent(f.slowShare), {
      className: `number ${italic}${hot}`,
      title: `${f.slow} of ${f.allocations} allocations took the slow path, ${since}`,
    });
    const low = f.barnHits !== null && f.barnHits < BARN_HITS_LOW ? " warn" : "";
    cell(row, "barn-hits", percent(f.barnHits), {
      className: `number ${italic}${low}`,
      title: `barn visits that found a full sheaf, ${since}`,
    });
    cell(row, "live-bytes", bytes(f.live), { className: "number" });
    cell(row, "held-bytes", bytes(f.held), { className: "number" });
    const ratio = cell(row, "live-share", "", { title: `${percent(f.liveShare)} of held bytes are live` });
    const bar = document.createElement("div");
    bar.className = "bar";
    const fill = document.createElement("div");
    fill.style.width = `${Math.min(100, (f.liveShare || 0) * 100).toFixed(1)}%`;
    bar.appendChild(fill);
    const label = document.createElement("span");
    label.textContent = percent(f.liveShare);
    const share = document.createElement("div");
    share.className = "share";
    share.append(bar, label);
    ratio.appendChild(share);
    cell(row, "capacity", String(cache.sheaf_capacity), {
      className: "number",
      title: `1\u2013${cache.sheaf_capacity_max} for this cache`,
    });
    cell(row, "in-use", inUse(cache), { className: "number" });
    cell(row, "tuning", f.tuning === null ? "\u2013" : f.tuning, {
      title: f.tuning === null ? "unknown: this sidecar does not report tuning" : `tuning: ${f.tuning}`,
      className: f.tuning === null ? "unknown" : `tuning-${f.tuning}`,
    });
    const actions = cell(row, "actions", "");
    const change = document.createElement("button");
    change.type = "button";
    change.textContent = "change";
    change.dataset.cache = cache.name;
    change.addEventListener("click", () => chooseCache(cache.name, true));
    actions.appendChild(change);
    return row;
  }

  function render(data, now) {
    const seconds = (now - state.previousAt) / 1000;
    const before = state.previous;
    const caches = Array.isArray(data.caches) ? data.caches : [];
    const showAll = $("show-all").checked;
    const rows = [];
    const totals = { allocations: 0, slow: 0, rate: 0, live: 0, held: 0, cumulative: false };
    for (const cache of caches) {
      const f = figures(cache, before ? before.get(cache.name) : null, seconds);
      totals.allocations += f.allocations;
      totals.slow += f.slow;
      totals.rate += f.allocRate || 0;
      totals.live += f.live;
      totals.held += f.held;
      totals.cumulative = f.cumulative;
      if (showAll || isUsed(cache)) rows.push({ cache, f });
    }
    rows.sort((a, b) => {
      const byRate = (b.f.allocRate || 0) - (a.f.allocRate || 0);
      if (byRate !== 0) return byRate;
      const byCount = b.cache.allocations - a.cache.allocations;
      return byCount !== 0 ? byCount : a.cache.object_size - b.cache.object_size;
    });
    const body = $("rows");
    const fragment = document.createDocumentFragment();
    for (const { cache, f } of rows) fragment.appendChild(buildRow(cache, f));
    body.replaceChildren(fragment);
    if (rows.length === 0) {
      const row = document.createElement("tr");
      row.className = "placeholder";
      cell(row, "none", "no cache has been used yet");
      row.firstChild.colSpan = 12;
      body.appendChild(row);
    }

    const threads = data.threads || {};
    $("sum-threads").textContent = `${threads.live ?? "\u2013"} live, ${threads.ever ?? "\u2013"} ever`;
    $("sum-rate").textContent = totals.cumulative ? "\u2013" : rate(totals.rate);
    $("sum-slow").textContent = percent(share(totals.slow, totals.allocations));
    $("sum-live").textContent = bytes(totals.live);
    $("sum-held").textContent = bytes(totals.held);
    const large = data.large || {};
    $("sum-large").textContent = `${large.live_objects ?? 0} (${bytes(large.bytes_held)})`;

    state.latest = new Map(caches.map((cache) => [cache.name, cache]));
    state.previous = state.latest;
    state.previousAt = now;
    fillCacheChoice(caches);
    state.refreshes += 1;
    document.body.dataset.refreshes = String(state.refreshes);
    document.body.dataset.rows = String(rows.length);
    const every = Number($("interval").value) / 1000;
    setStatus("ok", `updated ${new Date().toLocaleTimeString()}, every ${every} s`);
  }

  function setStatus(kind, text) {
    const status = $("status");
    status.dataset.state = kind;
    status.textContent = text;
  }

  // ---- refreshing -------------------------------------------------------

  async function refresh() {
    clearTimeout(state.timer);
    let data = null;
    try {
      const response = await fetch("/v1/caches", { headers: headers(false), cache: "no-store" });
      if (response.status === 401) {
        setStatus("error", "this control plane needs the token for reads: enter it under \u201ctoken\u201d");
        $("token-box").open = true;
      } else if (!response.ok) {
        setStatus("error", `GET /v1/caches: ${await errorText(response)}`);
      } else {
        data = await response.json();
      }
    } catch (error) {
      setStatus("error", `cannot reach the control plane: ${error.message}`);
    } finally {
      state.timer = setTimeout(refresh, Number($("interval").value));
    }
    // Outside the try: a failure here is the page's own, and is reported
    // as such (unhandled rejection), not as a network problem.
    if (data !== null) render(data, performance.now());
  }

  async function errorText(response) {
    try {
      const body = await response.json();
      if (body && typeof body.error === "string") return `${response.status}: ${body.error}`;
    } catch (_) {
      // Not JSON: the status says enough.
    }
    return `${response.status} ${response.statusText}`;
  }

  // ---- changing a capacity ----------------------------------------------

  function fillCacheChoice(caches) {
    const select = $("cap-cache");
    if (select.options.length === caches.length) {
      describeChoice();
      return;
    }
    const chosen = select.value;
    select.replaceChildren(
      ...caches.map((cache) => {
        const option = document.createElement("option");
        option.value = cache.name;
        option.textContent = cache.name;
        return option;
      }),
    );
    if (chosen) select.value = chosen;
    describeChoice();
  }

  function describeChoice() {
    const cache = state.latest.get($("cap-cache").value);
    const input = $("cap-value");
    if (!cache) {
      $("cap-hint").textContent = "";
      return;
    }
    input.max = String(cache.sheaf_capacity_max);
    const tuning = Object.prototype.hasOwnProperty.call(cache, "tuning") ? `, tuning ${cache.tuning}` : "";
    $("cap-hint").textContent = `now ${cache.sheaf_capacity}, allowed 1\u2013${cache.sheaf_capacity_max}${tuning}`;
    $("cap-auto").hidden = !Object.prototype.hasOwnProperty.call(cache, "tuning");
  }

  function chooseCache(name, focus) {
    $("cap-cache").value = name;
    const cache = state.latest.get(name);
    if (cache) $("cap-value").value = String(cache.sheaf_capacity);
    describeChoice();
    if (focus) $("cap-value").focus();
  }

  async function setCapacity(name, capacity) {
    const result = $("cap-result");
    result.dataset.state = "pending";
    result.textContent = `setting ${name}\u2026`;
    try {
      const response = await fetch(`/v1/caches/${encodeURIComponent(name)}/sheaf_capacity`, {
        method: "PUT",
        headers: headers(true),
        body: JSON.stringify({ sheaf_capacity: capacity }),
      });
      if (!response.ok) {
        // Read the message first: a test or a person watching the state
        // must never see "error" beside the pending text.
        const message = await errorText(response);
        result.dataset.state = "error";
        result.textContent = `${name}: ${message}`;
        return;
      }
      const changed = await response.json();
      result.dataset.state = "ok";
      result.textContent =
        `${changed.name}: sheaf capacity ${changed.previous_sheaf_capacity} \u2192 ${changed.sheaf_capacity}` +
        " (threads apply it at their next sheaf exchange)";
      refresh();
    } catch (error) {
      result.dataset.state = "error";
      result.textContent = `${name}: request failed: ${error.message}`;
    }
  }

  $("capacity-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const name = $("cap-cache").value;
    const text = $("cap-value").value.trim();
    if (!name || text === "") {
      const result = $("cap-result");
      result.dataset.state = "error";
      result.textContent = "choose a cache and enter a capacity";
      return;
    }
    // The server applies the rules (range, bytes per sheaf): send what was typed.
    setCapacity(name, Number(text));
  });
  $("cap-auto").addEventListener("click", () => setCapacity($("cap-cache").value, "auto"));
  $("cap-cache").addEventListener("change", () => chooseCache($("cap-cache").value, false));
  $("interval").addEventListener("change", refresh);
  $("show-all").addEventListener("change", refresh);
  $("token").value = state.token;
  $("token-use").addEventListener("click", () => {
    saveToken($("token").value.trim());
    refresh();
  });

  refresh();
})();
