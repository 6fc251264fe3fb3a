// agentgym view: a single page over the JSON API of agentgym/viewer/app.py.
// Every piece of data becomes a text node (textContent / createTextNode), never markup:
// observations and model replies may hold anything.
"use strict";

const app = document.getElementById("app");
const crumbs = document.getElementById("crumbs");
const tip = document.getElementById("tip");
const SVG = "http://www.w3.org/2000/svg";
const CLIP = 4000; // characters of a long text shown before "show all"
const cache = new Map();

// --- small helpers ------------------------------------------------------------------------------
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "style") el.style.cssText = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
function s(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  return el;
}
const num = (x, d = 3) => (typeof x === "number" && isFinite(x) ? x.toFixed(d) : "–");
const signed = (x, d = 4) => (typeof x === "number" && isFinite(x) ? (x >= 0 ? "+" : "") + x.toFixed(d) : "–");
const sign = (x) => (typeof x === "number" && x > 1e-12 ? "pos" : typeof x === "number" && x < -1e-12 ? "neg" : "");
const hue = (id) => Math.round(30 + ((id * 137.508) % 300)); // no pure red: red marks invalid steps
const anchorColor = (id) => `hsl(${hue(id)} 75% 48%)`;
const kb = (n) => (n >= 1024 * 1024 ? (n / 1048576).toFixed(1) + " MB" : (n / 1024).toFixed(1) + " kB");

async function api(path) {
  if (cache.has(path)) return cache.get(path);
  const res = await fetch("/api" + path, { headers: { Accept: "application/json" } });
  const data = await res.json();
  if (!res.ok) throw new Error(data.error || res.statusText);
  if (!path.endsWith("/metrics") && !/^\/s\/\d+$/.test(path)) cache.set(path, data);
  return data;
}

// A long text: the first CLIP characters, the rest on request (a 100 kB observation stays cheap).
function longText(text, cls) {
  text = text === null || text === undefined ? "" : String(text);
  const pre = h("pre", { class: cls || "" });
  if (text.length <= CLIP) { pre.textContent = text; return pre; }
  pre.textContent = text.slice(0, CLIP);
  const more = h("button", { class: "more", onclick: () => { pre.textContent = text; more.remove(); } },
    `show all (${kb(text.length)})`);
  return h("div", {}, pre, more);
}

function pill(text, cls) { return h("span", { class: "pill " + (cls || "") }, text); }
function outcomePill(ep) {
  if (ep.infra_error) return pill("infra error", "warn");
  return ep.success ? pill("success", "ok") : pill("failure", "bad");
}
function setCrumbs(items) {
  crumbs.replaceChildren(...items.map(([label, href]) => (href ? h("a", { href }, label) : h("span", {}, label))));
}
function show(...nodes) { app.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined && n !== false)); window.scrollTo(0, 0); }

// token tooltips: one listener for the whole page
document.addEventListener("mouseover", (ev) => {
  const t = ev.target.closest && ev.target.closest(".tok");
  if (!t) { tip.hidden = true; return; }
  tip.textContent = t.dataset.tip;
  tip.hidden = false;
});
document.addEventListener("mousemove", (ev) => {
  if (!tip.hidden) { tip.style.left = ev.clientX + 12 + "px"; tip.style.top = ev.clientY + 14 + "px"; }
});

// --- routing --------------------------------------------------------------------------------------
function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query] = raw.split("?");
  return { parts: path ? path.split("/").map(decodeURIComponent) : [], query: new URLSearchParams(query || "") };
}
async function route() {
  const hash = location.hash;
  delete app.dataset.rendered;
  await render();
  if (location.hash === hash) app.dataset.rendered = hash; // tests (and scripts) wait for this
}
async function render() {
  const { parts, query } = parseHash();
  tip.hidden = true;
  try {
    if (parts[0] === "s" && parts.length === 2) return await runPage(+parts[1]);
    if (parts[0] === "s" && parts[2] === "f" && parts.length === 4) return await filePage(+parts[1], +parts[3], query);
    if (parts[0] === "s" && parts[4] === "e") return await episodePage(+parts[1], +parts[3], +parts[5], query);
    if (parts[0] === "s" && parts[4] === "cmp") return await comparePage(+parts[1], +parts[3], +parts[5], +parts[6]);
    if (parts[0] === "reports") return await reportsPage(parts[1], parts[2]);
    return await homePage();
  } catch (err) {
    show(h("p", { class: "error", "data-testid": "error" }, "could not load: " + err.message));
  }
}
window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", route);

// --- home: the sources given on the command line ---------------------------------------------------
async function homePage() {
  const sources = await api("/sources");
  if (sources.length === 1) { location.replace("#/s/0"); return; }
  setCrumbs([]);
  show(h("h1", {}, "Runs"), h("ul", {}, sources.map((src) => h("li", {}, h("a", { href: `#/s/${src.index}` }, src.name),
    " ", h("span", { class: "muted" }, src.path)))));
}

// --- a run: curves, trajectory files, evaluation reports -------------------------------------------
// a source that is just one trajectory file (no metrics, no reports): its page is that file's episodes
const soloFile = (run) => run.files.length === 1 && !run.has_metrics && !run.reports.length;

async function runPage(si) {
  const run = await api(`/s/${si}`);
  if (soloFile(run)) { location.replace(`#/s/${si}/f/0`); return; }
  setCrumbs([[run.name, null]]);
  const meta = h("p", { class: "muted" }, run.path,
    run.env ? ` · ${run.env}` : "", run.estimator ? ` · estimator ${run.estimator}` : "");
  const parts = [h("h1", {}, run.name), meta];
  if (run.has_metrics) {
    parts.push(h("h2", {}, "Learning curves"));
    const box = h("div", { "data-testid": "curves" }, h("p", { class: "muted" }, "loading metrics…"));
    parts.push(box);
    curveSeries(si).then((series) => drawCurves(box, series)).catch((e) => box.replaceChildren(h("p", { class: "error" }, e.message)));
  }
  parts.push(h("h2", {}, "Trajectories"));
  if (!run.files.length) {
    parts.push(h("p", { class: "muted" }, "No trajectory files yet: the trainer writes them with log.save_trajectories_every > 0."));
  } else {
    parts.push(h("table", { "data-testid": "files" }, h("tr", {}, h("th", {}, "file"), h("th", {}, "kind"), h("th", { class: "num" }, "iteration"), h("th", { class: "num" }, "size")),
      run.files.map((f) => h("tr", {}, h("td", {}, h("a", { href: `#/s/${si}/f/${f.index}` }, f.label)), h("td", {}, f.kind),
        h("td", { class: "num" }, f.iteration ?? "–"), h("td", { class: "num" }, kb(f.bytes))))));
  }
  if (run.reports.length) {
    parts.push(h("h2", {}, "Evaluation reports"));
    const table = h("table", { "data-testid": "reports" }, h("tr", {}, ["report", "success", "95% CI", "score", "steps", "invalid", "episodes"].map((c, i) => h("th", { class: i ? "num" : "" }, c))));
    parts.push(table);
    for (const r of run.reports) {
      const row = h("tr", {}, h("td", {}, r.label));
      table.append(row);
      api(`/s/${si}/r/${r.index}`).then((rep) => {
        const o = rep.overall || {};
        const sr = o.success_rate || {};
        row.append(h("td", { class: "num" }, num(sr.value)), h("td", { class: "num" }, `[${num(sr.low, 2)}, ${num(sr.high, 2)}]`),
          h("td", { class: "num" }, num((o.mean_score || {}).value)), h("td", { class: "num" }, num((o.mean_steps || {}).value, 1)),
          h("td", { class: "num" }, num((o.invalid_action_rate || {}).value)), h("td", { class: "num" }, o.episodes ?? "–"));
      }).catch(() => row.append(h("td", { class: "error" }, "unreadable")));
    }
    parts.push(await reportPicker(si));
  }
  show(...parts);
}

async function reportPicker(si) {
  const sources = await api("/sources");
  const options = [];
  for (const src of sources) {
    const run = await api(`/s/${src.index}`);
    for (const r of run.reports) options.push([`${src.index}:${r.index}`, `${run.name} · ${r.label}`]);
  }
  const mine = options.filter(([v]) => v.startsWith(si + ":"));
  const pick = (def) => h("select", {}, options.map(([v, l]) => { const o = h("option", { value: v }, l); if (v === def) o.selected = true; return o; }));
  const a = pick(mine.length ? mine[0][0] : options[0][0]);
  const b = pick(options[options.length - 1][0]);
  return h("p", { class: "filters" }, "Side by side: ", a, " vs ", b,
    h("button", { onclick: () => { location.hash = `#/reports/${a.value}/${b.value}`; } }, "compare"),
    sources.length < 2 ? h("span", { class: "muted" }, "(pass two run dirs to `agentgym view` to compare runs)") : null);
}

const DEFAULT_CURVES = ["rollout/success_rate", "eval/success_rate", "adv/abs_mean", "rollout/invalid_rate",
  "train/pg_loss", "train/kl", "rollout/mean_steps", "time/iteration_s"];
const RUN_COLORS = ["#2f5fd0", "#d9822b", "#1f8a4c", "#8e44ad", "#c0392b", "#16a2b8"];

// this run's metrics first, then every other source given to `agentgym view` that has metrics (overlaid)
async function curveSeries(si) {
  const sources = await api("/sources");
  const series = [];
  for (const src of [sources[si], ...sources.filter((x) => x.index !== si)]) {
    const run = await api(`/s/${src.index}`);
    if (run.has_metrics) series.push({ name: run.name, records: await api(`/s/${src.index}/metrics`) });
  }
  series.forEach((x, k) => { x.color = RUN_COLORS[k % RUN_COLORS.length]; });
  return series;
}

// the curves' shared view: EMA smoothing, a step range (zoom), the other runs on or off
function drawCurves(box, series) {
  const view = { smooth: 0, lo: null, hi: null, overlay: true };
  const keys = new Set();
  for (const r of series[0].records) for (const [k, v] of Object.entries(r)) if (k !== "step" && k !== "time" && typeof v === "number") keys.add(k);
  const all = [...keys].sort();
  const shown = DEFAULT_CURVES.filter((k) => keys.has(k));
  const grid = h("div", { class: "curves" });
  const redraw = () => grid.replaceChildren(...shown.map((k) => curve(k, view.overlay ? series : series.slice(0, 1), view, setZoom)));
  const select = h("select", { "aria-label": "add a curve" }, h("option", { value: "" }, "add a curve…"), all.map((k) => h("option", { value: k }, k)));
  select.addEventListener("change", () => { if (select.value && !shown.includes(select.value)) { shown.unshift(select.value); redraw(); } select.value = ""; });
  const smooth = h("input", { type: "range", min: 0, max: 0.95, step: 0.05, value: 0, "data-testid": "smooth", "aria-label": "smoothing" });
  const smoothLabel = h("span", { class: "muted" }, "off");
  smooth.addEventListener("input", () => { view.smooth = +smooth.value; smoothLabel.textContent = view.smooth ? `EMA ${view.smooth}` : "off"; redraw(); });
  const lo = h("input", { type: "number", class: "stepbox", "data-testid": "zoom-lo", "aria-label": "first step shown", placeholder: "first" });
  const hi = h("input", { type: "number", class: "stepbox", "data-testid": "zoom-hi", "aria-label": "last step shown", placeholder: "last" });
  function setZoom(a, b) {
    [view.lo, view.hi] = [a, b];
    lo.value = a === null ? "" : String(a); hi.value = b === null ? "" : String(b);
    redraw();
  }
  const typed = () => setZoom(lo.value === "" ? null : +lo.value, hi.value === "" ? null : +hi.value);
  lo.addEventListener("change", typed); hi.addEventListener("change", typed);
  const reset = h("button", { "data-testid": "zoom-reset", onclick: () => setZoom(null, null) }, "all steps");
  const controls = [select, h("label", {}, "smoothing ", smooth, " ", smoothLabel), h("label", {}, "steps ", lo, " – ", hi), reset];
  if (series.length > 1) {
    const overlay = h("input", { type: "checkbox", "data-testid": "overlay" });
    overlay.checked = true;
    overlay.addEventListener("change", () => { view.overlay = overlay.checked; redraw(); });
    controls.push(h("label", {}, overlay, " overlay other runs "),
      h("span", { class: "legend" }, series.map((x) => h("span", {}, h("span", { class: "swatch", style: `background:${x.color}` }), x.name))));
  }
  box.replaceChildren(h("p", { class: "filters" }, ...controls),
    h("p", { class: "muted" }, `${series[0].records.length} records in metrics.jsonl · drag across a plot to zoom, double-click for all steps`), grid);
  redraw();
}

const compact = (y) => { const a = Math.abs(y); return a !== 0 && (a >= 1e4 || a < 1e-3) ? y.toExponential(1) : String(+y.toPrecision(3)); };
// exponential moving average, debiased as TensorBoard's: the first points are not pulled toward 0 or y0
const ema = (ys, w) => { let m = 0; return ys.map((y, k) => { m = w * m + (1 - w) * y; return m / (1 - w ** (k + 1)); }); };

function curve(key, series, view, setZoom) {
  const W = 340, H = 170, L = 50, R = 8, T = 8, B = 30;
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": key });
  const lines = series.map((x) => {
    const pts = x.records.filter((r) => typeof r[key] === "number" && typeof r.step === "number" && isFinite(r[key]))
      .map((r) => [r.step, r[key]]).filter(([st]) => (view.lo === null || st >= view.lo) && (view.hi === null || st <= view.hi));
    const smooth = view.smooth ? ema(pts.map((p) => p[1]), view.smooth) : null;
    return { ...x, pts, smooth };
  });
  const own = lines[0];
  const fig = h("div", { class: "curve", "data-key": key, "data-points": own.pts.length, "data-runs": lines.filter((l) => l.pts.length).length },
    h("div", { class: "title" }, key), svg);
  const every = lines.flatMap((l) => l.pts);
  if (!every.length) return fig;
  const xs = every.map((p) => p[0]), ys = every.map((p) => p[1]);
  let [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
  const X = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R), Y = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  svg.append(s("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }), s("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  const label = (x, y, text, anchor, cls) => { const t = s("text", { x, y, "text-anchor": anchor, class: cls || "" }); t.textContent = text; svg.append(t); };
  label(L - 4, T + 8, compact(y1), "end", "ylab"); label(L - 4, H - B, compact(y0), "end", "ylab");
  label(L, H - B + 12, String(x0), "start", "xlab"); label(W - R, H - B + 12, String(x1), "end", "xlab");
  label((L + W - R) / 2, H - 4, "step (iteration)", "middle", "xlab");
  const path = (pts, ysOf, cls, color) => {
    const line = s("polyline", { class: cls, "data-run": color, points: pts.map((p, k) => `${X(p[0]).toFixed(1)},${Y(ysOf(p, k)).toFixed(1)}`).join(" ") });
    line.style.stroke = color; // CSSOM, not a style attribute: the page's CSP allows no inline styles
    svg.append(line);
  };
  for (const l of [...lines].reverse()) { // this run drawn last, on top
    if (!l.pts.length) continue;
    path(l.pts, (p) => p[1], l.smooth ? "line raw" : "line", l.color);
    if (l.smooth) path(l.pts, (p, k) => l.smooth[k], "line", l.color);
  }
  if (own.pts.length <= 200) for (const p of own.pts) {
    const c = s("circle", { class: "pt", cx: X(p[0]).toFixed(1), cy: Y(p[1]).toFixed(1), r: 2.2 });
    c.style.fill = own.color;
    const t = s("title"); t.textContent = `step ${p[0]}: ${p[1]}`; c.append(t); svg.append(c);
  }
  // drag across the plot to zoom every curve to that step range; double-click: all steps
  const toStep = (ev) => { const r = svg.getBoundingClientRect(); const vx = ((ev.clientX - r.left) / r.width) * W; return x0 + ((vx - L) / (W - L - R)) * (x1 - x0); };
  let from = null, band = null;
  svg.addEventListener("mousedown", (ev) => { from = toStep(ev); band = s("rect", { class: "band", y: T, height: H - T - B, x: X(from), width: 0 }); svg.append(band); ev.preventDefault(); });
  svg.addEventListener("mousemove", (ev) => { if (from === null) return; const a = X(from), b = X(toStep(ev)); band.setAttribute("x", Math.min(a, b)); band.setAttribute("width", Math.abs(b - a)); });
  svg.addEventListener("mouseup", (ev) => {
    if (from === null) return;
    const to = toStep(ev), a = Math.min(from, to), b = Math.max(from, to);
    from = null;
    if (b - a < (x1 - x0) / 50) { band.remove(); return; } // a click, not a drag
    setZoom(Math.floor(a), Math.ceil(b));
  });
  svg.addEventListener("dblclick", () => setZoom(null, null));
  return fig;
}

// --- a trajectory file: groups of episodes, with filters -------------------------------------------
function matches(ep, q, g) {
  const needle = (q.get("q") || "").trim().toLowerCase();
  if (needle && g) {
    const hay = [g.task_id, g.instruction, g.category, ep.category, ep.error].map((x) => String(x ?? "")).join("\n").toLowerCase();
    if (!hay.includes(needle)) return false;
  }
  const outcome = q.get("outcome") || "all";
  if (outcome === "success" && !(ep.success && !ep.infra_error)) return false;
  if (outcome === "failure" && (ep.success || ep.infra_error)) return false;
  if (outcome === "infra" && !ep.infra_error) return false;
  if (q.get("invalid") === "1" && !ep.invalid) return false;
  if (q.get("cat") && ep.category !== q.get("cat")) return false;
  return true;
}

function setQuery(q) {
  const { parts } = parseHash();
  const text = q.toString();
  location.hash = "#/" + parts.map(encodeURIComponent).join("/") + (text ? "?" + text : "");
}

async function filePage(si, fi, q) {
  const [run, data] = await Promise.all([api(`/s/${si}`), api(`/s/${si}/f/${fi}`)]);
  const file = run.files[fi] || { label: `file ${fi}` };
  setCrumbs(soloFile(run) ? [[run.name, null]] : [[run.name, `#/s/${si}`], [file.label, null]]);
  const radios = ["all", "success", "failure", "infra"].map((v) => {
    const input = h("input", { type: "radio", name: "outcome", value: v, "data-testid": `filter-${v}` });
    input.checked = (q.get("outcome") || "all") === v;
    input.addEventListener("change", () => { v === "all" ? q.delete("outcome") : q.set("outcome", v); setQuery(q); });
    return h("label", {}, input, " ", v === "infra" ? "infra errors" : v === "all" ? "all" : v === "success" ? "successes" : "failures");
  });
  const invalid = h("input", { type: "checkbox", "data-testid": "filter-invalid" });
  invalid.checked = q.get("invalid") === "1";
  invalid.addEventListener("change", () => { invalid.checked ? q.set("invalid", "1") : q.delete("invalid"); setQuery(q); });
  const cat = h("select", { "data-testid": "filter-category", "aria-label": "task category" }, h("option", { value: "" }, "all categories"),
    data.categories.map((c) => { const o = h("option", { value: c }, c); if (q.get("cat") === c) o.selected = true; return o; }));
  cat.addEventListener("change", () => { cat.value ? q.set("cat", cat.value) : q.delete("cat"); setQuery(q); });

  const chosen = new Set();
  const cmp = h("button", { disabled: true, "data-testid": "compare" }, "side by side");
  const updateCmp = () => {
    const ids = [...chosen];
    const groups = new Set(ids.map((i) => groupOf.get(i)));
    cmp.disabled = !(ids.length === 2 && groups.size === 1);
  };
  cmp.addEventListener("click", () => { const [a, b] = [...chosen]; location.hash = `#/s/${si}/f/${fi}/cmp/${a}/${b}`; });
  const groupOf = new Map();
  let shown = 0;
  const groups = [];
  const flat = []; // [episode, group] of every episode the filters keep
  const row = (ep, g) => {
    const box = h("input", { type: "checkbox", "aria-label": `select episode ${ep.index}` });
    box.checked = chosen.has(ep.index);
    box.addEventListener("change", () => { box.checked ? chosen.add(ep.index) : chosen.delete(ep.index); updateCmp(); });
    // a branch of a tree rollout: under its parent (depth), named by the step it starts from
    const name = h("td", {},
      ep.branch_step !== null && ep.branch_step !== undefined ? h("span", { class: "muted", "data-testid": "branch-of" },
        `↳ t=${ep.branch_step} `) : null,
      h("a", { href: `#/s/${si}/f/${fi}/e/${ep.index}` }, `episode ${ep.index}`),
      ep.branch_count ? h("span", { class: "muted" }, ` · ${ep.branch_count} branches`) : null);
    if (ep.depth && !g) name.style.paddingLeft = `${0.6 + 1.6 * ep.depth}em`; // CSSOM: the CSP allows no inline styles
    return h("tr", { "data-episode": ep.index, "data-testid": "episode-row", "data-depth": ep.depth || 0,
      "data-parent": ep.parent ?? "" }, h("td", {}, box),
      name, g ? h("td", { class: "mono muted" }, g.task_id || "") : null,
      h("td", {}, outcomePill(ep)),
      h("td", { class: "num" }, num(ep.score, 2)), h("td", { class: "num" }, ep.steps), h("td", { class: "num" + (ep.invalid ? " bad" : "") }, ep.invalid),
      h("td", { class: "num", "data-testid": "return" }, num(ep.return, 2)), h("td", { class: "num adv " + sign(ep.mean_adv), "data-testid": "mean-adv" }, signed(ep.mean_adv)),
      h("td", { class: "muted" }, ep.infra_error ? ep.error || "" : ""));
  };
  for (const g of data.groups) {
    const eps = g.episodes.filter((ep) => matches(ep, q, g));
    for (const ep of g.episodes) groupOf.set(ep.index, g.group_id);
    if (!eps.length) continue;
    shown += eps.length;
    // a tree rollout's branches are not more tries of the task: "solved" counts the root episodes
    const roots = g.episodes.filter((e) => e.branch_step === null || e.branch_step === undefined);
    const wins = roots.filter((e) => e.success && !e.infra_error).length;
    const branches = g.episodes.length - roots.length;
    for (const ep of eps) flat.push([ep, g]);
    const rows = eps.map((ep) => row(ep));
    groups.push(h("div", { class: "group", "data-group": g.group_id },
      h("div", { class: "group-head" }, h("strong", {}, `group ${g.group_id.split(":")[0]}`), h("span", { class: "mono muted" }, g.task_id || ""),
        g.category ? pill(g.category) : null, h("span", {}, `${wins}/${roots.length} solved`),
        branches ? h("span", { class: "muted" }, `+ ${branches} branches`) : null),
      h("div", {}, g.instruction),
      h("table", {}, h("tr", {}, ["", "episode", "outcome", "score", "steps", "invalid", "return", "mean adv", ""].map((c) => h("th", {}, c))), rows)));
  }
  const search = h("input", { type: "search", placeholder: "search task, instruction, category…", "data-testid": "search", "aria-label": "search", value: q.get("q") || "" });
  search.addEventListener("change", () => { search.value.trim() ? q.set("q", search.value.trim()) : q.delete("q"); setQuery(q); });
  const SORTS = { "": "group order", "return-desc": "return, highest first", "return-asc": "return, lowest first",
    "adv-desc": "mean advantage, highest first", "adv-asc": "mean advantage, lowest first" };
  const sort = h("select", { "data-testid": "sort", "aria-label": "sort episodes" },
    Object.entries(SORTS).map(([v, l]) => { const o = h("option", { value: v }, l); if ((q.get("sort") || "") === v) o.selected = true; return o; }));
  sort.addEventListener("change", () => { sort.value ? q.set("sort", sort.value) : q.delete("sort"); setQuery(q); });
  let body;
  if (q.get("sort") && SORTS[q.get("sort")]) { // one table of every kept episode, in the chosen order (missing values last)
    const [field, dir] = q.get("sort").split("-");
    const value = (ep) => (field === "return" ? ep.return : ep.mean_adv);
    const key = (ep) => (typeof value(ep) === "number" ? (dir === "desc" ? -value(ep) : value(ep)) : Infinity);
    flat.sort((a, b) => key(a[0]) - key(b[0]) || a[0].index - b[0].index);
    body = flat.length ? h("table", { "data-testid": "sorted" }, h("tr", {}, ["", "episode", "task", "outcome", "score", "steps", "invalid", "return", "mean adv", ""].map((c) => h("th", {}, c))),
      flat.map(([ep, g]) => row(ep, g))) : h("p", { class: "muted" }, "no episode matches the filters");
  } else {
    body = groups.length ? h("div", {}, groups) : h("p", { class: "muted" }, "no episode matches the filters");
  }
  show(h("h1", {}, file.label), h("p", { class: "muted" }, `${data.episodes} episodes in ${data.groups.length} groups`,
    data.estimator ? ` · advantages from ${data.estimator}` : "", data.bad_lines ? ` · ${data.bad_lines} unreadable line(s) skipped` : ""),
  h("div", { class: "card filters" }, search, ...radios, h("label", {}, invalid, " with invalid steps"), cat, h("label", {}, "sort ", sort), cmp,
    h("span", { class: "muted", "data-testid": "shown" }, `showing ${shown} of ${data.episodes} episodes`)),
  advantageHistogram(flat.map(([ep]) => ep.mean_adv).filter((x) => typeof x === "number" && isFinite(x))),
  body);
}

// the episodes' mean advantages (those the filters keep), in 20 equal bins
function advantageHistogram(values) {
  if (!values.length) return null;
  const BINS = 20, W = 520, H = 120, L = 30, R = 8, T = 8, B = 24;
  let lo = Math.min(...values), hi = Math.max(...values);
  if (hi === lo) { lo -= 0.5; hi += 0.5; }
  const counts = new Array(BINS).fill(0);
  for (const v of values) counts[Math.min(BINS - 1, Math.floor(((v - lo) / (hi - lo)) * BINS))]++;
  const top = Math.max(...counts);
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "histogram of mean advantages" });
  const bw = (W - L - R) / BINS;
  counts.forEach((c, k) => {
    const hgt = (c / top) * (H - T - B);
    const mid = lo + ((k + 0.5) / BINS) * (hi - lo);
    const bar = s("rect", { class: "bar " + sign(mid), x: (L + k * bw + 1).toFixed(1), y: (H - B - hgt).toFixed(1), width: (bw - 2).toFixed(1), height: hgt.toFixed(1) });
    const t = s("title"); t.textContent = `${c} episode(s) with mean advantage in [${compact(lo + (k / BINS) * (hi - lo))}, ${compact(lo + ((k + 1) / BINS) * (hi - lo))})`;
    bar.append(t); svg.append(bar);
  });
  svg.append(s("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  const label = (x, y, text, anchor) => { const t = s("text", { x, y, "text-anchor": anchor }); t.textContent = text; svg.append(t); };
  label(L, H - B + 12, compact(lo), "start"); label(W - R, H - B + 12, compact(hi), "end");
  label(L - 4, T + 8, String(top), "end"); label((L + W - R) / 2, H - 3, "mean advantage of an episode", "middle");
  if (lo < 0 && hi > 0) { const x0 = L + ((0 - lo) / (hi - lo)) * (W - L - R); svg.append(s("line", { class: "zero", x1: x0, y1: T, x2: x0, y2: H - B })); }
  return h("div", { class: "card hist", "data-testid": "adv-hist", "data-counts": counts.join(","), "data-n": values.length },
    h("div", { class: "title" }, `mean advantage per episode (${values.length} episodes)`), svg);
}

// --- one episode, step by step --------------------------------------------------------------------------
// A byte-level tokenizer splits a multi-byte character (é, ✓, 中) over several tokens, and each
// decoded alone is U+FFFD ("?"). The reply's text holds the character: a run of such tokens shows
// the characters between its neighbours, on its first token (the others are marked as its bytes).
function byteTokens(tokens, text) {
  const out = tokens.map((t) => ({ text: t, cont: false }));
  if (typeof text !== "string" || !tokens.some((t) => typeof t === "string" && t.includes("\ufffd"))) return out;
  let pos = 0;
  for (let k = 0; k < out.length;) {
    const t = out[k].text;
    if (typeof t !== "string") { k++; continue; }
    if (!t.includes("\ufffd")) { const at = text.indexOf(t, pos); if (at >= 0 && at - pos < 8) pos = at + t.length; k++; continue; }
    let j = k;
    while (j < out.length && typeof out[j].text === "string" && out[j].text.includes("\ufffd")) j++;
    const next = j < out.length && typeof out[j].text === "string" && out[j].text ? text.indexOf(out[j].text, pos) : text.length;
    if (next > pos) {
      out[k].text = text.slice(pos, next);
      for (let m = k + 1; m < j; m++) out[m] = { text: "", cont: true };
      pos = next;
    }
    k = j;
  }
  return out;
}

function tokensView(step) {
  const n = Math.max(step.logprobs.length, step.response_ids.length);
  if (!n) return longText(step.text);
  const box = h("div", { class: "tokens", "data-testid": "tokens" });
  const pieces = step.tokens ? byteTokens(step.tokens, step.text) : [];
  for (let k = 0; k < n; k++) {
    const lp = step.logprobs[k];
    const id = step.response_ids[k];
    const piece = pieces[k] && typeof pieces[k].text === "string" ? pieces[k] : { text: `⟨${id}⟩`, cont: false };
    const text = piece.cont ? "\u200b" : piece.text;
    const p = typeof lp === "number" ? Math.exp(lp) : null;
    const what = piece.cont ? "a further byte of the character before" : JSON.stringify(piece.text);
    const span = h("span", { class: "tok" + (piece.cont ? " cont" : ""), "data-lp": lp ?? "", "data-tip": `token ${k} (id ${id}) ${what}\nlogprob ${typeof lp === "number" ? lp.toFixed(4) : "n/a"}   p = ${p === null ? "n/a" : p.toFixed(3)}` }, text);
    if (p !== null) span.style.background = `rgba(220, 60, 50, ${(0.55 * (1 - p)).toFixed(3)})`;
    box.append(span);
  }
  return h("div", {}, box, step.tokens ? null : h("div", { class: "muted" }, "token text not recorded: ids shown; the reply as text:"), step.tokens ? null : longText(step.text));
}

function promptView(step) {
  const det = h("details", {}, h("summary", {}, `prompt the model saw (${step.messages.length} messages${step.prompt_tokens ? `, ${step.prompt_tokens} tokens` : ""})`));
  let filled = false;
  det.addEventListener("toggle", () => {
    if (filled || !det.open) return;
    filled = true; // built on first open: a long history is many large texts
    for (const m of step.messages) det.append(h("div", { class: "msg" }, h("div", { class: "role" }, String(m.role ?? "")), longText(typeof m.content === "string" ? m.content : JSON.stringify(m.content))));
  });
  return det;
}

function anchorBadge(step, epIndex) {
  const size = step.anchor_members.length;
  const shared = size > 1;
  const badge = h("span", { class: "pill anchor" + (shared ? "" : " solo"), "data-testid": "anchor", "data-anchor-group": step.anchor_group,
    title: `anchor ${step.anchor}: ${shared ? `${size} steps of this group share this state` : "no other step of the group reached this state"}` },
  `anchor A${step.anchor_group}${shared ? " ×" + size : ""}`);
  if (shared) {
    badge.style.borderColor = anchorColor(step.anchor_group);
    badge.style.background = `hsl(${hue(step.anchor_group)} 80% 93%)`;
  }
  return badge;
}

function advantageView(step) {
  const a = step.advantage || {};
  if (a.total === undefined) return h("span", { class: "muted" }, "no advantage recorded");
  return h("span", { class: "adv-box" },
    h("span", {}, "A "), h("span", { class: "adv " + sign(a.total), "data-testid": "adv-total", "data-value": a.total }, signed(a.total)),
    a.episode !== undefined ? h("span", { class: "muted" }, " = episode ") : null,
    a.episode !== undefined ? h("span", { class: "adv " + sign(a.episode), "data-testid": "adv-episode", "data-value": a.episode }, signed(a.episode)) : null,
    a.step !== undefined ? h("span", { class: "muted" }, " + step ") : null,
    a.step !== undefined ? h("span", { class: "adv " + sign(a.step), "data-testid": "adv-step", "data-value": a.step }, signed(a.step)) : null);
}

// RLVMR's meta-reasoning tag of the reply (planning / explore / reflection / monitor), its meta
// reward when the reward hook scored it, and a red pill when the reply broke the tag format
function metaTag(step) {
  if (step.meta_ok === undefined || step.meta_ok === null) return null;
  const reward = typeof step.meta_reward === "number" ? ` ${signed(step.meta_reward, 3)}` : "";
  const text = step.meta_ok ? `<${step.meta_tag}>${reward}` : `tag format${reward}`;
  const el = pill(text, step.meta_ok ? "" : "bad");
  el.dataset.testid = "meta-tag";
  el.title = step.meta_ok ? `meta-reasoning tag ${step.meta_tag}` + (reward ? `, meta reward${reward}` : "")
    : `format penalty: ${step.meta_problem}`;
  return el;
}

function stepCard(ep, step, links) {
  const card = h("div", { class: "step" + (step.action_valid ? "" : " invalid"), "data-testid": "step", "data-step": step.t,
    "data-episode": ep.index, "data-anchor-group": step.anchor_group, "data-shared": step.anchor_members.length > 1 ? "1" : "0" });
  if (step.anchor_members.length > 1) card.style.setProperty("--hl", anchorColor(step.anchor_group));
  const others = step.anchor_members.filter(([e, t]) => !(e === ep.index && t === step.t));
  card.append(...[
    h("div", { class: "step-head" }, h("span", { class: "t" }, `t=${step.turn ?? step.t}`), anchorBadge(step, ep.index),
      h("span", { class: "mono" }, step.action === null ? "(no action parsed)" : step.action),
      step.action_valid ? pill("valid", "ok") : pill("invalid", "bad"), metaTag(step),
      h("span", {}, "reward ", h("span", { class: "mono", "data-testid": "reward" }, num(step.reward, 3))),
      step.progress !== null && step.progress !== undefined ? h("span", { class: "muted" }, `progress ${num(step.progress, 2)}`) : null,
      advantageView(step)),
    links && others.length ? h("div", { class: "muted" }, "same state: ",
      others.slice(0, 12).map(([e, t, turn], k) => [k ? ", " : "", e === ep.index ? `t=${turn ?? t}` : h("a", { href: links(e) }, `episode ${e} t=${turn ?? t}`)]),
      others.length > 12 ? ` and ${others.length - 12} more` : "") : null,
    h("h3", {}, "observation"), longText(step.observation),
    h("h3", {}, "reply ", h("span", { class: "muted" }, step.logprobs.length ? "(hover a token for its logprob)" : "")), tokensView(step),
    promptView(step)].filter(Boolean));
  return card;
}

// click an anchor badge: light up every step of the page in that anchor group, dim the rest
function wireAnchors(root) {
  root.addEventListener("click", (ev) => {
    const badge = ev.target.closest(".anchor:not(.solo)");
    if (!badge) return;
    const id = badge.dataset.anchorGroup;
    const active = root.dataset.active === id;
    root.dataset.active = active ? "" : id;
    for (const card of root.querySelectorAll(".step")) {
      card.classList.toggle("hl", !active && card.dataset.anchorGroup === id);
      card.classList.toggle("dim", !active && card.dataset.anchorGroup !== id);
    }
  });
}

// where a tree rollout's episode sits: the parent it branched from, or how many branches it has
function treeLine(ep, link) {
  if (ep.branch_step !== null && ep.branch_step !== undefined) {
    return h("p", { "data-testid": "branch-of" }, `branch from t=${ep.branch_step} of `,
      ep.parent !== null && link ? h("a", { href: link(ep.parent) }, `episode ${ep.parent}`) : ep.parent !== null ? `episode ${ep.parent}` : "an episode not in this file",
      ": its steps are numbered from there");
  }
  return ep.branch_count ? h("p", { class: "muted" }, `${ep.branch_count} branches start from its steps: each is shown under the step it starts from`) : null;
}

// the branches that start from one step of the episode: each with its outcome, return and steps
function branchPoint(point, link) {
  const from = typeof point.return_from_here === "number" ? ` (this episode from here: ${num(point.return_from_here, 3)})` : "";
  return h("div", { class: "branches", "data-testid": "branch-point", "data-step": point.step },
    h("div", { class: "muted" }, `${point.branches.length} branches from t=${point.step}: mean return `,
      h("span", { class: "mono", "data-testid": "branch-mean" }, num(point.mean_return, 3)), from),
    point.branches.map((b) => h("div", { class: "branch", "data-testid": "branch", "data-episode": b.index },
      h("div", { class: "step-head" }, h("a", { href: link(b.index) }, `episode ${b.index}`), outcomePill(b),
        h("span", {}, "return ", h("span", { class: "mono", "data-testid": "return" }, num(b.return, 3))),
        h("span", {}, `${b.steps.length} steps`), h("span", { class: b.invalid ? "bad" : "" }, `${b.invalid} invalid`),
        b.mean_adv !== null ? h("span", {}, "mean A ", h("span", { class: "adv " + sign(b.mean_adv) }, signed(b.mean_adv))) : null),
      h("table", { class: "branch-steps" }, h("tr", {}, ["t", "action", "", "reward", "A"].map((c) => h("th", {}, c))),
        b.steps.map((st) => h("tr", { "data-testid": "branch-step", "data-turn": st.turn },
          h("td", { class: "num" }, `t=${st.turn}`), h("td", { class: "mono" }, st.action === null ? "(no action parsed)" : st.action),
          h("td", {}, st.action_valid ? pill("valid", "ok") : pill("invalid", "bad")),
          h("td", { class: "num mono" }, num(st.reward, 3)), h("td", { class: "num adv " + sign(st.advantage) }, signed(st.advantage))))))));
}

function episodeHeader(ep, link) {
  return h("div", { class: "card" },
    h("div", { class: "step-head" }, outcomePill(ep), h("span", {}, `score ${num(ep.score, 3)}`), h("span", {}, `${ep.num_steps} steps`),
      h("span", { class: ep.invalid ? "bad" : "" }, `${ep.invalid} invalid`), h("span", {}, `return ${num(ep.return, 3)}`),
      ep.truncated ? pill("truncated", "warn") : null, ep.category ? pill(ep.category) : null),
    h("p", {}, h("strong", {}, "instruction: "), ep.instruction),
    treeLine(ep, link),
    h("div", { class: "kv" }, h("span", {}, "task"), h("span", { class: "mono" }, ep.task_id || ""), h("span", {}, "group"), h("span", { class: "mono" }, ep.group_id),
      h("span", {}, "env / seed"), h("span", {}, `${ep.env_id || "?"} / ${ep.seed ?? "?"}`),
      h("span", {}, "advantages"), h("span", {}, ep.estimator ? `${ep.estimator} (iteration ${ep.iteration})` + (ep.drop_abs_adv_below ? `, |A| < ${ep.drop_abs_adv_below} left the loss` : "") : "none (evaluation or plain rollout)")),
    ep.infra_error ? h("p", { class: "warn" }, "infra error: ", ep.error || "unknown") : null);
}

async function episodePage(si, fi, ei, q) {
  const [run, ep] = await Promise.all([api(`/s/${si}`), api(`/s/${si}/f/${fi}/e/${ei}`)]);
  const file = run.files[fi] || { label: `file ${fi}` };
  setCrumbs([[run.name, `#/s/${si}`], [file.label, `#/s/${si}/f/${fi}`], [`episode ${ei}`, null]]);
  const onlyInvalid = q.get("invalid") === "1";
  const toggle = h("input", { type: "checkbox", "data-testid": "only-invalid" });
  toggle.checked = onlyInvalid;
  toggle.addEventListener("change", () => { toggle.checked ? q.set("invalid", "1") : q.delete("invalid"); setQuery(q); });
  const siblings = ep.group_episodes.filter((e) => e !== ei);
  const link = (e) => `#/s/${si}/f/${fi}/e/${e}`;
  // a tree: each step's card, then the branches that start from that step
  const at = new Map(ep.branch_points.filter((p) => p.t !== null).map((p) => [p.t, p]));
  const beyond = ep.branch_points.filter((p) => p.t === null);
  const steps = h("div", { class: "steps", "data-testid": "steps" },
    ep.steps.filter((st) => !onlyInvalid || !st.action_valid).map((st) => [stepCard(ep, st, link),
      at.has(st.t) ? branchPoint(at.get(st.t), link) : null]),
    beyond.length ? h("h3", {}, "branches from steps this episode does not have") : null,
    beyond.map((p) => branchPoint(p, link)));
  wireAnchors(steps);
  show(h("h1", {}, `Episode ${ei}`), episodeHeader(ep, link),
    h("p", { class: "filters" }, "other episodes of the group: ", siblings.length ? siblings.map((e) => h("span", {},
      h("a", { href: `#/s/${si}/f/${fi}/e/${e}` }, `episode ${e}`), " (", h("a", { href: `#/s/${si}/f/${fi}/cmp/${ei}/${e}`, "data-testid": "side-by-side" }, "side by side"), ")")) : "none",
    h("label", {}, toggle, " invalid steps only")),
    steps, ep.final_observation ? h("div", {}, h("h3", {}, "final observation"), longText(ep.final_observation)) : null);
}

async function comparePage(si, fi, a, b) {
  const [run, ea, eb] = await Promise.all([api(`/s/${si}`), api(`/s/${si}/f/${fi}/e/${a}`), api(`/s/${si}/f/${fi}/e/${b}`)]);
  const file = run.files[fi] || { label: `file ${fi}` };
  setCrumbs([[run.name, `#/s/${si}`], [file.label, `#/s/${si}/f/${fi}`], [`episodes ${a} and ${b}`, null]]);
  const column = (ep) => h("div", { "data-testid": "column", "data-episode": ep.index },
    h("h2", {}, h("a", { href: `#/s/${si}/f/${fi}/e/${ep.index}` }, `Episode ${ep.index}`)), episodeHeader(ep),
    h("div", { class: "steps" }, ep.steps.map((st) => stepCard(ep, st, null))));
  const grid = h("div", { class: "side" }, column(ea), column(eb));
  for (const card of grid.querySelectorAll(".step[data-shared='1']")) card.style.borderLeftColor = anchorColor(+card.dataset.anchorGroup);
  wireAnchors(grid);
  show(h("h1", {}, `Side by side: episodes ${a} and ${b}`),
    ea.group_id !== eb.group_id ? h("p", { class: "warn" }, "these episodes are from different groups (different tasks or seeds)") : null,
    h("p", { class: "muted" }, "Steps in the same environment state share an anchor (GiGPO's step groups) and a colour; click an anchor to light up its steps."),
    grid);
}

// --- two evaluation reports side by side ----------------------------------------------------------------
async function reportsPage(ka, kb_) {
  const get = (key) => { const [si, ri] = key.split(":").map(Number); return api(`/s/${si}/r/${ri}`); };
  const [ra, rb] = await Promise.all([get(ka), get(kb_)]);
  setCrumbs([["compare reports", null]]);
  const rows = [["success rate", (r) => r.overall?.success_rate], ["mean score", (r) => r.overall?.mean_score],
    ["mean steps", (r) => r.overall?.mean_steps], ["invalid-action rate", (r) => r.overall?.invalid_action_rate]];
  const ks = new Set([...Object.keys(ra.pass_at_k || {}), ...Object.keys(rb.pass_at_k || {})]);
  for (const k of [...ks].sort((x, y) => x - y)) rows.push([`pass@${k}`, (r) => (r.pass_at_k || {})[k]]);
  const cell = (est) => (est && typeof est.value === "number" ? `${num(est.value)} [${num(est.low, 2)}, ${num(est.high, 2)}]` : "–");
  const delta = (x, y) => (x && y && typeof x.value === "number" && typeof y.value === "number" ? y.value - x.value : null);
  const table = (title, list) => h("div", {}, h("h2", {}, title), h("table", { "data-testid": "report-compare" },
    h("tr", {}, h("th", {}, ""), h("th", { class: "num" }, ra._label), h("th", { class: "num" }, rb._label), h("th", { class: "num" }, "B − A")),
    list.map(([name, f]) => { const d = delta(f(ra), f(rb)); return h("tr", {}, h("td", {}, name), h("td", { class: "num" }, cell(f(ra))), h("td", { class: "num" }, cell(f(rb))),
      h("td", { class: "num delta " + sign(d) }, signed(d, 3))); })));
  const cats = [...new Set([...Object.keys(ra.categories || {}), ...Object.keys(rb.categories || {})])].sort();
  show(h("h1", {}, "Evaluation reports side by side"),
    h("p", { class: "muted" }, `A: ${ra._label} (${ra.policy}, ${ra.split}) · B: ${rb._label} (${rb.policy}, ${rb.split})`),
    table("Overall", rows),
    cats.length > 1 ? table("Success by category", cats.map((c) => [c, (r) => (r.categories || {})[c]?.success_rate])) : null);
}
