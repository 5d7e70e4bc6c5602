// The live map of released windows: hexagons from /api/dashboard/windows/{start},
// window list and budget from the server-sent /api/dashboard/events. No other origin is
// contacted unless a tile URL is configured.
"use strict";

const REFERENCE_ZOOM = 18; // hexagons are drawn once, in Web Mercator pixels at this zoom
const state = {
  config: null, windows: [], selected: null, drawnVersion: null, follow: true,
  cells: new Map(), fitted: false, loading: null,
};
const $ = (id) => document.getElementById(id);
const fmt = (x, digits) => (typeof x === "number" && isFinite(x) ? x.toFixed(digits) : "—");

// --- colour scale: the stops of stream_dp.dashboard.colour_scale over [0, U] -----------
function hexRgb(hex) {
  return [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
}
function colourOf(mean) {
  const stops = state.config.colour_stops;
  const t = Math.min(1, Math.max(0, mean / state.config.upper)) * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(t));
  const a = hexRgb(stops[i]), b = hexRgb(stops[i + 1]), f = t - i;
  const c = a.map((v, k) => Math.round(v + (b[k] - v) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}
// Uncertainty: a cell fades as its mean_error grows to U/4 (unknown error: opaque).
function opacityOf(meanError) {
  if (typeof meanError !== "number") return 0.85;
  return 0.85 - 0.65 * Math.min(1, meanError / (state.config.upper / 4));
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
    const uncertain = err !== "" && err >= state.config.upper / 4 ? ' class="uncertain"' : "";
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
  tip.textContent = `${c.mean.toFixed(2)}${err} ${state.config.units} · ${c.n_vehicles} vehicles`;
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

function showRecord(c) {
  const u = state.config.units;
  const pm = (v, e, d) => `${fmt(v, d)} ± ${fmt(e, d)}`;
  const rows = [
    ["cell", `${c.cell} (res ${c.resolution})`],
    ["vehicles", c.n_vehicles], ["readings", c.n_readings],
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
  $("b-cumulative").textContent = w ? fmt(w.cumulative_epsilon, 2) : "—";
  $("b-period").textContent = w && typeof w.period_loss_bound === "number"
    ? `≤ ${fmt(w.period_loss_bound, 2)} (${fmt(w.budget_period_seconds / 3600, 0)} h)` : "—";
  $("b-window").textContent = w ? `${fmt(w.privacy_loss, 2)} (K=${w.K ?? "—"})` : "—";
  $("b-released").textContent = !w ? "—"
    : w.status === "failed" ? `failed (${w.error ?? "error"})` : w.cells_released ?? "—";
  $("b-withheld").textContent = w && w.cells_withheld !== undefined ? w.cells_withheld : "—";
  $("b-counts").textContent = w ? `${w.n_vehicles ?? "—"} · ${w.n_readings ?? "—"}` : "—";
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
      : `${when} · ${w.cells_released ?? 0} cells`;
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
  showBudget(w);
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

function onWindows(windows) {
  state.windows = windows;
  const newest = windows.length ? windows[windows.length - 1].window_start : null;
  if (state.follow || !state.selected) state.selected = newest;
  fillSelector();
  if (state.selected) select(state.selected);
  else showBudget(null);
}

function step(delta) {
  const i = state.windows.findIndex((w) => w.window_start === state.selected);
  const j = i + delta;
  if (i < 0 || j < 0 || j >= state.windows.length) return;
  state.follow = j === state.windows.length - 1;
  $("follow").checked = state.follow;
  select(state.windows[j].window_start);
}

// --- legend, settings, live updates --------------------------------------------------------
function showLegend() {
  const c = state.config;
  $("legend-title").textContent = `Released mean (${c.units})`;
  $("legend-bar").style.background = `linear-gradient(to right, ${c.colour_stops.join(", ")})`;
  const ticks = [0, c.upper / 4, c.upper / 2, (3 * c.upper) / 4, c.upper];
  $("legend-ticks").replaceChildren(...ticks.map((t) => {
    const s = document.createElement("span"); s.textContent = fmt(t, 0); return s;
  }));
  const err = $("legend-error");
  err.replaceChildren(document.createTextNode("± error:"));
  for (const e of [0, c.upper / 8, c.upper / 4]) {
    const sw = document.createElement("span");
    sw.className = "swatch";
    sw.style.background = colourOf(c.upper / 2);
    sw.style.opacity = opacityOf(e).toFixed(2);
    err.append(sw, document.createTextNode(e ? `${fmt(e, 0)}` : "0"));
  }
  err.append(document.createTextNode(` ${c.units}`));
  showParams(null);
}

// The release parameters as the selected window's records state them (a standalone
// dashboard's own settings need not match the workers'); U is configuration.
function showParams(w) {
  const c = state.config;
  const parts = [];
  if (w && w.epsilon !== undefined) parts.push(`ε=${w.epsilon} per cell`, w.mechanism);
  if (w && w.resolution !== undefined) parts.push(`H3 res ${w.resolution}`);
  parts.push(`U=${c.upper} ${c.units}`, `from the ${c.source}`);
  $("params").textContent = parts.join(" · ");
}

function connect() {
  const status = $("status");
  const source = new EventSource("/api/dashboard/events");
  source.addEventListener("open", () => {
    status.textContent = "live"; status.dataset.state = "live";
  });
  source.addEventListener("windows", (e) => onWindows(JSON.parse(e.data).windows));
  source.addEventListener("error", () => {
    status.textContent = "reconnecting…"; status.dataset.state = "reconnecting";
  });
}

async function start() {
  const response = await fetch("/api/dashboard/config", { cache: "no-store" });
  state.config = await response.json();
  if (state.config.tile_url) {
    L.tileLayer(state.config.tile_url, {
      attribution: state.config.tile_attribution, maxZoom: 19,
    }).addTo(map);
  }
  showLegend();
  $("window-select").addEventListener("change", (e) => {
    const newest = state.windows.length && state.windows[state.windows.length - 1].window_start;
    state.follow = e.target.value === newest;
    $("follow").checked = state.follow;
    select(e.target.value);
  });
  $("follow").addEventListener("change", (e) => {
    state.follow = e.target.checked;
    if (state.follow && state.windows.length) select(state.windows[state.windows.length - 1].window_start);
  });
  $("older").addEventListener("click", () => step(-1));
  $("newer").addEventListener("click", () => step(1));
  connect();
}
start();
