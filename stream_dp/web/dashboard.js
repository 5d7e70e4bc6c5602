// The live map of released windows: hexagons from /api/dashboard/windows/{start},
// window list and budget from the server-sent /api/dashboard/events. The only other host
// contacted is the basemap's tile server (map_tiles; none with map_tiles none).
"use strict";

const REFERENCE_ZOOM = 18; // hexagons are drawn once, in Web Mercator pixels at this zoom
const state = {
  config: null, windows: [], selected: null, drawnVersion: null, follow: true,
  cells: new Map(), fitted: false, loading: null, upper: null, legendUpper: null,
  wanted: null, // the window named by the URL (#window=…), until the index holds it
};
const $ = (id) => document.getElementById(id);
const fmt = (x, digits) => (typeof x === "number" && isFinite(x) ? x.toFixed(digits) : "—");
const plural = (n, noun) => `${n} ${noun}${n === 1 ? "" : "s"}`;
// U of a window: as its records state it, else the configured one (older records).
const upperOf = (w) => (w && typeof w.upper === "number" ? w.upper : state.config.upper);
// A record's span [start, end) as stream_dp.dashboard.span_text writes it: "2024-06-01
// 07:00–13:00" (the end's date too when it is a later day, except a span ending at 24:00).
function spanText(start, end) {
  const [d0, t0, d1, t1] = [start.slice(0, 10), start.slice(11, 16), end.slice(0, 10),
    end.slice(11, 16)];
  const nextDay = new Date(Date.parse(`${d0}T00:00:00Z`) + 86400000).toISOString().slice(0, 10);
  if (d1 === d0) return `${d0} ${t0}–${t1}`;
  if (t1 === "00:00" && d1 === nextDay) return `${d0} ${t0}–24:00`;
  return `${d0} ${t0}–${d1} ${t1}`;
}
const spanHours = (c) => (Date.parse(c.window_end) - Date.parse(c.window_start)) / 3600000;
// Secret routes (docs/math.md §14): noisy counts and an interval, every vehicle's (ε, δ).
const SECRET = "secret-routes";
const isSecret = (r) => r && r.privacy_model === SECRET;
const modelOf = (r) => (r && r.privacy_model) || "public-occupancy";
const vehiclesText = (c) => (typeof c.n_vehicles_noisy === "number"
  ? `≈ ${Math.round(c.n_vehicles_noisy)} vehicles (noisy count)` : plural(c.n_vehicles, "vehicle"));
const hasCells = (w) => w.status !== "failed" && (w.cells_released ?? w.cells_received) > 0;

// --- colour scale: the stops of stream_dp.dashboard.colour_scale over [0, U] -----------
// U is the selected window's (state.upper), so a release made with another U is drawn on
// its own scale.
function hexRgb(hex) {
  return [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
}
function colourOf(mean) {
  const stops = state.config.colour_stops;
  const t = Math.min(1, Math.max(0, mean / state.upper)) * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(t));
  const a = hexRgb(stops[i]), b = hexRgb(stops[i + 1]), f = t - i;
  const c = a.map((v, k) => Math.round(v + (b[k] - v) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}
// Uncertainty: a cell fades as its mean_error grows to U/4 (unknown error: opaque).
function opacityOf(meanError) {
  if (typeof meanError !== "number") return 0.85;
  return 0.85 - 0.65 * Math.min(1, meanError / (state.upper / 4));
}

// --- map ---------------------------------------------------------------------------------
const map = L.map("map", { zoomControl: true, worldCopyJump: false, preferCanvas: false });
map.attributionControl.setPrefix(
  '<a href="/dashboard/static/leaflet/LICENSE" title="Leaflet licence">Leaflet</a>');
map.setView([20, 0], 2);
L.control.scale({ imperial: false }).addTo(map);
const Coordinates = L.Control.extend({
  options: { position: "bottomleft" },
  onAdd() {
    const div = L.DomUtil.create("div", "coordinates");
    div.id = "coordinates";
    div.textContent = "lat, lng under the pointer";
    map.on("mousemove", (e) => {
      div.textContent = `${e.latlng.lat.toFixed(5)}°, ${e.latlng.lng.toFixed(5)}°`;
    });
    return div;
  },
});
new Coordinates().addTo(map);
let hexOverlay = null;

function drawWindow(start, cells, version) {
  const began = performance.now();
  const z = REFERENCE_ZOOM;
  let minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
  const projected = new Array(cells.length);
  for (let i = 0; i < cells.length; i++) {
    const ring = cells[i].boundary;
    const pts = new Array(ring.length);
    for (let j = 0; j < ring.length; j++) {
      const p = map.project(ring[j], z);
      pts[j] = p;
      if (p.x < minX) minX = p.x;
      if (p.y < minY) minY = p.y;
      if (p.x > maxX) maxX = p.x;
      if (p.y > maxY) maxY = p.y;
    }
    projected[i] = pts;
  }
  const parts = [];
  state.cells = new Map();
  for (let i = 0; i < cells.length; i++) {
    const c = cells[i];
    state.cells.set(c.cell, c);
    const d = "M" + projected[i].map((p) => `${(p.x - minX).toFixed(1)},${(p.y - minY).toFixed(1)}`)
      .join("L") + "Z";
    const err = typeof c.mean_error === "number" ? c.mean_error : "";
    const uncertain = err !== "" && err >= state.upper / 4 ? ' class="uncertain"' : "";
    parts.push(`<path d="${d}" fill="${colourOf(c.mean)}" fill-opacity="${opacityOf(c.mean_error)
      .toFixed(2)}" data-cell="${c.cell}" data-mean="${c.mean}" data-mean-error="${err}"` +
      ` data-resolution="${c.resolution}"${uncertain}/>`);
  }
  if (hexOverlay) { hexOverlay.remove(); hexOverlay = null; }
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "hex-layer");
  svg.id = "hexes";
  svg.dataset.window = start;
  svg.dataset.cells = cells.length;
  svg.dataset.upper = String(state.upper);
  if (cells.length) {
    svg.setAttribute("viewBox", `0 0 ${Math.max(maxX - minX, 1e-3)} ${Math.max(maxY - minY, 1e-3)}`);
    svg.setAttribute("preserveAspectRatio", "none");
    svg.innerHTML = parts.join("");
    const bounds = L.latLngBounds(map.unproject([minX, maxY], z), map.unproject([maxX, minY], z));
    hexOverlay = L.svgOverlay(svg, bounds, { interactive: true }).addTo(map);
    if (!state.fitted) { map.fitBounds(bounds, { padding: [20, 20] }); state.fitted = true; }
  } else {
    svg.style.display = "none";
    document.body.append(svg); // keeps the hooks (data-window, data-cells) readable
    hexOverlay = { remove: () => svg.remove() };
  }
  state.drawnVersion = version;
  document.body.dataset.window = start;
  state.resolutions = [...new Set(cells.map((c) => c.resolution))].sort((a, b) => a - b);
  showParams(currentEntry());
  // Rendered once the browser has painted the frame holding the new paths.
  requestAnimationFrame(() => requestAnimationFrame(() => {
    svg.dataset.renderMs = (performance.now() - began).toFixed(1);
    svg.dataset.drawnAt = String(Date.now());
    svg.dataset.version = String(version);
    document.body.dataset.renderedWindow = start;
  }));
  svg.addEventListener("click", onCellClick);
  svg.addEventListener("mousemove", onCellHover);
  svg.addEventListener("mouseleave", () => { $("tooltip").hidden = true; });
}

function onCellHover(event) {
  const path = event.target.closest("path[data-cell]");
  const tip = $("tooltip");
  if (!path) { tip.hidden = true; return; }
  const c = state.cells.get(path.dataset.cell);
  const err = typeof c.mean_error === "number" ? ` ± ${c.mean_error.toFixed(2)}` : " ± —";
  tip.textContent = `${c.mean.toFixed(2)}${err} ${state.config.units} · ` +
    vehiclesText(c) +
    (spanHours(c) > 1 ? ` · ${spanText(c.window_start, c.window_end)}` : "");
  tip.style.left = `${event.clientX + 12}px`;
  tip.style.top = `${event.clientY + 12}px`;
  tip.hidden = false;
}

function onCellClick(event) {
  const path = event.target.closest("path[data-cell]");
  if (!path) return;
  document.querySelectorAll("#hexes path.selected").forEach((p) => p.classList.remove("selected"));
  path.classList.add("selected");
  showRecord(state.cells.get(path.dataset.cell));
}

function secretRows(c) {
  const u = state.config.units;
  return [
    ["cell", `${c.cell} (res ${c.resolution})`],
    ["window", spanText(c.window_start, c.window_end)],
    ["privacy model", `${SECRET} (the routes are secret too)`],
    ["vehicles (noisy count)", fmt(c.n_vehicles_noisy, 1)],
    [`mean (${u})`, `${fmt(c.mean, 2)} ± ${fmt(c.mean_error, 2)}`],
    [`${Math.round((c.interval_level ?? 0.95) * 100)} % interval (${u})`,
      `[${fmt(c.mean_low, 2)}, ${fmt(c.mean_high, 2)}]`],
    ["ε · δ (this window, every vehicle)",
      `${fmt(c.epsilon_window, 3)} · ${c.delta_window?.toExponential(1) ?? "—"}`],
    ["release id", c.release_id],
  ];
}

function showRecord(c) {
  const u = state.config.units;
  const pm = (v, e, d) => `${fmt(v, d)} ± ${fmt(e, d)}`;
  const rows = isSecret(c) ? secretRows(c) : [
    ["cell", `${c.cell} (res ${c.resolution})`],
    ["span", `${spanText(c.window_start, c.window_end)} (${plural(spanHours(c), "hour")})`],
    ["vehicles", c.n_vehicles], ["readings (whole span)", c.n_readings],
    [`mean (${u})`, pm(c.mean, c.mean_error, 2)],
    [`variance (${u}²)`, pm(c.variance, c.variance_error, 1)],
    ["worst-case error bound", fmt(c.error_bound, 2)],
    ["mechanism", c.mechanism ?? "—"], ["ε (this cell)", c.epsilon ?? "—"],
    ["release id", c.release_id],
  ];
  const dl = $("details-fields");
  dl.dataset.cell = c.cell;
  dl.replaceChildren(...rows.flatMap(([k, v]) => {
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd"); dd.textContent = String(v);
    return [dt, dd];
  }));
  $("details-hint").hidden = true;
}

// --- windows, budget ----------------------------------------------------------------------
function currentEntry() {
  return state.windows.find((w) => w.window_start === state.selected) || null;
}

function showBudget(w) {
  const panel = $("budget");
  panel.dataset.cumulativeEpsilon = w ? String(w.cumulative_epsilon) : "";
  panel.dataset.window = w ? w.window_start : "";
  showParams(w);
  $("b-model").textContent = w ? modelOf(w) : "—";
  $("b-cumulative").textContent = w ? fmt(w.cumulative_epsilon, 2) : "—";
  $("b-period").textContent = w && typeof w.period_loss_bound === "number"
    ? `≤ ${fmt(w.period_loss_bound, 2)} (${fmt(w.budget_period_seconds / 3600, 0)} h)` : "—";
  $("b-window").textContent = w ? `${fmt(w.privacy_loss, 2)} (K=${w.K ?? "—"})` : "—";
  $("b-released").textContent = !w ? "—"
    : w.status === "failed" ? `failed (${w.error ?? "error"})` : w.cells_released ?? "—";
  showNote();
  $("b-withheld").textContent = w && w.cells_withheld !== undefined ? w.cells_withheld : "—";
  $("b-held").textContent = w && w.cells_held !== undefined ? w.cells_held : "—";
  $("b-planner").textContent = w && w.planned_by ? `the ${w.planned_by}` : "—";
  $("b-counts").textContent = w ? `${w.n_vehicles ?? "—"} · ${w.n_readings ?? "—"}` : "—";
  if (isSecret(w)) showSecretBudget(w);
}

// Every vehicle loses the same under secret routes: the window's and the period's (ε, δ).
function showSecretBudget(w) {
  $("b-period").textContent = `${fmt(w.epsilon_period, 2)} (δ ${w.delta_period?.toExponential(1)}`
    + `, ${plural(w.windows_in_period, "window")}, every vehicle)`;
  $("b-window").textContent = `ε ${fmt(w.epsilon_window, 3)} (every vehicle)`;
  $("b-counts").textContent = "secret: noisy counts per cell only";
}

function fillSelector() {
  const select = $("window-select");
  const options = state.windows.slice().reverse().map((w) => {
    const o = document.createElement("option");
    o.value = w.window_start;
    const when = w.window_start.slice(0, 16).replace("T", " ");
    o.dataset.status = w.status || "released";
    o.textContent = w.status === "failed"
      ? `${when} · release failed (${w.error ?? "error"})`
      : `${when} · ${plural(w.cells_released ?? 0, "cell")}`;
    return o;
  });
  select.replaceChildren(...options);
  select.value = state.selected ?? "";
  select.dataset.windows = state.windows.length;
}

async function select(start) {
  state.selected = start;
  $("window-select").value = start;
  const w = currentEntry();
  if (w && upperOf(w) !== state.upper) {
    state.upper = upperOf(w);
    state.drawnVersion = null; // redraw on the window's own scale
  }
  showLegend();
  showBudget(w);
  if (w) {
    const hash = `#window=${start}`; // RFC 3339: characters a fragment may hold
    if (location.hash !== hash) history.replaceState(null, "", hash);
  }
  if (!w || (state.drawnVersion === w.version && document.body.dataset.window === start)) return;
  const version = w.version;
  const response = await fetch(`/api/dashboard/windows/${encodeURIComponent(start)}`,
    { cache: "no-store" });
  if (!response.ok) return;
  const data = await response.json();
  if (state.selected !== start) return; // another window was chosen meanwhile
  if (document.body.dataset.window === start && state.drawnVersion > version) return; // stale
  drawWindow(start, data.cells, version);
}

// The window the page opens on and follows: the newest one with released cells (the
// newest of all when none has any); the newest window's summary says why it has none.
function newestDrawable() {
  const withCells = state.windows.filter(hasCells);
  const pick = withCells.length ? withCells : state.windows;
  return pick.length ? pick[pick.length - 1].window_start : null;
}

function windowFromHash() {
  const match = /^#window=(.+)$/.exec(location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

function onWindows(windows) {
  state.windows = windows;
  const known = (start) => windows.some((w) => w.window_start === start);
  if (state.wanted && known(state.wanted)) {
    state.selected = state.wanted;
    state.follow = state.wanted === newestDrawable();
    $("follow").checked = state.follow;
    state.wanted = null;
  } else if (state.follow || !state.selected || !known(state.selected)) {
    state.selected = newestDrawable();
  }
  fillSelector();
  if (state.selected) select(state.selected);
  else showBudget(null);
}

function step(delta) {
  const i = state.windows.findIndex((w) => w.window_start === state.selected);
  const j = i + delta;
  if (i < 0 || j < 0 || j >= state.windows.length) return;
  state.follow = state.windows[j].window_start === newestDrawable();
  $("follow").checked = state.follow;
  select(state.windows[j].window_start);
}

// Why a window drew nothing, from its summary alone.
function whyNoCells(w) {
  if (w.status === "failed") return `its release failed (${w.error ?? "error"}); nothing published`;
  if (isSecret(w)) {
    return `no cell's noisy vehicle count reached the threshold (${fmt(w.threshold_vehicles, 1)}`
      + " vehicles; secret-routes)";
  }
  if (!w.n_readings) return "it had no readings";
  const why = [];
  if (w.cells_held) {
    why.push(`${plural(w.cells_held, "cell")} held to pool with later hours (released ` +
      "with the window their span ends in)");
  }
  if (w.cells_withheld) {
    why.push(`${plural(w.cells_withheld, "cell")} withheld: none met the error target, ` +
      "even merged up to the coarsest resolution");
  }
  return why.length ? why.join("; ")
    : "no cell passed the release's selection (min_vehicles, top_cells)";
}

// The summary's counts and charge, as far as it states them.
function summaryLine(w) {
  const parts = [];
  if (typeof w.n_vehicles === "number") parts.push(plural(w.n_vehicles, "vehicle"));
  if (typeof w.n_readings === "number") parts.push(plural(w.n_readings, "reading"));
  if (w.readings_held) parts.push(`${w.readings_held} of them held`);
  if (typeof w.privacy_loss === "number") parts.push(`K·ε = ${fmt(w.privacy_loss, 2)} charged`);
  if (isSecret(w)) parts.push(`ε = ${fmt(w.epsilon_window, 3)} charged to every vehicle`);
  return parts.join(" · ");
}

// Beside the map: the newest window when it released no cell (the map shows an older
// one), or the selected window when it has none to draw.
function showNote() {
  const note = $("note");
  const newest = state.windows[state.windows.length - 1];
  const selected = currentEntry();
  let w = null, lead = "";
  if (selected && !hasCells(selected)) {
    w = selected; lead = "This window released no cell";
  } else if (newest && !hasCells(newest) && newest !== selected) {
    w = newest; lead = `Newest window ${newest.window_start.slice(0, 16).replace("T", " ")} ` +
      "released no cell";
  }
  note.hidden = !w;
  note.dataset.window = w ? w.window_start : "";
  $("note-text").textContent = w ? `${lead}: ${whyNoCells(w)}. ${summaryLine(w)}` : "";
}

// --- legend, settings, live updates --------------------------------------------------------
function showLegend() {
  const c = state.config, u = state.upper;
  if (state.legendUpper === u) return;
  state.legendUpper = u;
  $("legend").dataset.upper = String(u);
  $("legend-title").textContent = `Released mean (${c.units})`;
  $("legend-bar").style.background = `linear-gradient(to right, ${c.colour_stops.join(", ")})`;
  const ticks = [0, u / 4, u / 2, (3 * u) / 4, u];
  $("legend-ticks").replaceChildren(...ticks.map((t) => {
    const s = document.createElement("span"); s.textContent = fmt(t, 0); return s;
  }));
  const err = $("legend-error");
  err.replaceChildren(document.createTextNode("± error:"));
  for (const e of [0, u / 8, u / 4]) {
    const sw = document.createElement("span");
    sw.className = "swatch";
    sw.style.background = colourOf(u / 2);
    sw.style.opacity = opacityOf(e).toFixed(2);
    err.append(sw, document.createTextNode(e ? `${fmt(e, 0)}` : "0"));
  }
  err.append(document.createTextNode(` ${c.units}`));
}

// The release parameters as the selected window's records state them (a standalone
// dashboard's own settings need not match the workers'), and the H3 resolutions of the
// cells drawn (adaptive cells: several, coarser than the configured one).
function showParams(w) {
  const c = state.config;
  const parts = [];
  if (w && w.epsilon !== undefined) parts.push(`ε=${w.epsilon} per cell`, w.mechanism);
  if (w) parts.push(`protected by ${modelOf(w)}`);
  const drawn = w && document.body.dataset.window === w.window_start ? state.resolutions : [];
  if (drawn && drawn.length) parts.push(`H3 res ${drawn.join(", ")}`);
  parts.push(`U=${state.upper ?? c.upper} ${c.units}`);
  parts.push(c.live ? `from the ${c.source}` : "from a releases file");
  $("params").textContent = parts.join(" · ");
}

function connect() {
  const status = $("status");
  const source = new EventSource("/api/dashboard/events");
  source.addEventListener("open", () => {
    // "live" only while following the releases topic; a file's windows never change.
    status.textContent = state.config.live ? "live" : "file";
    status.dataset.state = state.config.live ? "live" : "file";
  });
  source.addEventListener("windows", (e) => onWindows(JSON.parse(e.data).windows));
  source.addEventListener("error", () => {
    status.textContent = "reconnecting…"; status.dataset.state = "reconnecting";
  });
}

async function start() {
  const response = await fetch("/api/dashboard/config", { cache: "no-store" });
  state.config = await response.json();
  state.upper = state.config.upper;
  state.wanted = windowFromHash();
  if (state.config.tile_url) {
    L.tileLayer(state.config.tile_url, {
      attribution: state.config.tile_attribution, maxZoom: 19,
    }).addTo(map);
  }
  showLegend();
  showParams(null);
  $("window-select").addEventListener("change", (e) => {
    state.follow = e.target.value === newestDrawable();
    $("follow").checked = state.follow;
    select(e.target.value);
  });
  $("follow").addEventListener("change", (e) => {
    state.follow = e.target.checked;
    if (state.follow && state.windows.length) select(newestDrawable());
  });
  window.addEventListener("hashchange", () => {
    const wanted = windowFromHash();
    if (!wanted || wanted === state.selected) return;
    if (!state.windows.some((w) => w.window_start === wanted)) { state.wanted = wanted; return; }
    state.follow = wanted === newestDrawable();
    $("follow").checked = state.follow;
    select(wanted);
  });
  $("older").addEventListener("click", () => step(-1));
  $("newer").addEventListener("click", () => step(1));
  connect();
}
start();
