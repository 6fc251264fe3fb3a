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
async function runPage(si) {
  const run = await api(`/s/${si}`);
  setCrumbs([[run.name, null]]);
  const meta = h("p", { class: "muted" }, run.path,
    run.env ? ` · ${run.env}` : "", run.estimator ? ` · estimator ${run.estimator}` : "");
  const parts = [h("h1", {}, run.name), meta];
  if (run.has_metrics) {
    parts.push(h("h2", {}, "Learning curves"));
    const box = h("div", { "data-testid": "curves" }, h("p", { class: "muted" }, "loading metrics…"));
    parts.push(box);
    api(`/s/${si}/metrics`).then((records) => drawCurves(box, records)).catch((e) => box.replaceChildren(h("p", { class: "error" }, e.message)));
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

function drawCurves(box, records) {
  const keys = new Set();
  for (const r of records) for (const [k, v] of Object.entries(r)) if (k !== "step" && k !== "time" && typeof v === "number") keys.add(k);
  const all = [...keys].sort();
  const shown = DEFAULT_CURVES.filter((k) => keys.has(k));
  const grid = h("div", { class: "curves" });
  const select = h("select", { "aria-label": "add a curve" }, h("option", { value: "" }, "add a curve…"), all.map((k) => h("option", { value: k }, k)));
  select.addEventListener("change", () => { if (select.value) { grid.prepend(curve(select.value, records)); select.value = ""; } });
  for (const k of shown) grid.append(curve(k, records));
  box.replaceChildren(h("p", {}, select, h("span", { class: "muted" }, ` ${records.length} records in metrics.jsonl`)), grid);
}

function curve(key, records) {
  const pts = records.filter((r) => typeof r[key] === "number" && typeof r.step === "number").map((r) => [r.step, r[key]]);
  const W = 320, H = 160, L = 42, R = 8, T = 8, B = 20;
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": key });
  const fig = h("div", { class: "curve", "data-key": key, "data-points": pts.length }, h("div", { class: "title" }, key), svg);
  if (!pts.length) return fig;
  const xs = pts.map((p) => p[0]), ys = pts.map((p) => p[1]);
  let [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
  const X = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R), Y = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  svg.append(s("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }), s("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  const label = (x, y, text, anchor) => { const t = s("text", { x, y, "text-anchor": anchor }); t.textContent = text; svg.append(t); };
  label(L - 4, T + 8, y1.toPrecision(3), "end"); label(L - 4, H - B, y0.toPrecision(3), "end");
  label(L, H - 5, String(x0), "start"); label(W - R, H - 5, String(x1), "end");
  svg.append(s("polyline", { class: "line", points: pts.map((p) => `${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join(" ") }));
  if (pts.length <= 200) for (const p of pts) {
    const c = s("circle", { class: "pt", cx: X(p[0]).toFixed(1), cy: Y(p[1]).toFixed(1), r: 2.2 });
    const t = s("title"); t.textContent = `step ${p[0]}: ${p[1]}`; c.append(t); svg.append(c);
  }
  return fig;
}

// --- a trajectory file: groups of episodes, with filters -------------------------------------------
function matches(ep, q) {
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
  setCrumbs([[run.name, `#/s/${si}`], [file.label, null]]);
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
  for (const g of data.groups) {
    const eps = g.episodes.filter((ep) => matches(ep, q));
    for (const ep of g.episodes) groupOf.set(ep.index, g.group_id);
    if (!eps.length) continue;
    shown += eps.length;
    const wins = g.episodes.filter((e) => e.success && !e.infra_error).length;
    const rows = eps.map((ep) => {
      const box = h("input", { type: "checkbox", "aria-label": `select episode ${ep.index}` });
      box.addEventListener("change", () => { box.checked ? chosen.add(ep.index) : chosen.delete(ep.index); updateCmp(); });
      return h("tr", { "data-episode": ep.index, "data-testid": "episode-row" }, h("td", {}, box),
        h("td", {}, h("a", { href: `#/s/${si}/f/${fi}/e/${ep.index}` }, `episode ${ep.index}`)), h("td", {}, outcomePill(ep)),
        h("td", { class: "num" }, num(ep.score, 2)), h("td", { class: "num" }, ep.steps), h("td", { class: "num" + (ep.invalid ? " bad" : "") }, ep.invalid),
        h("td", { class: "num" }, num(ep.return, 2)), h("td", { class: "num adv " + sign(ep.mean_adv) }, signed(ep.mean_adv)),
        h("td", { class: "muted" }, ep.infra_error ? ep.error || "" : ""));
    });
    groups.push(h("div", { class: "group", "data-group": g.group_id },
      h("div", { class: "group-head" }, h("strong", {}, `group ${g.group_id.split(":")[0]}`), h("span", { class: "mono muted" }, g.task_id || ""),
        g.category ? pill(g.category) : null, h("span", {}, `${wins}/${g.episodes.length} solved`)),
      h("div", {}, g.instruction),
      h("table", {}, h("tr", {}, ["", "episode", "outcome", "score", "steps", "invalid", "return", "mean adv", ""].map((c) => h("th", {}, c))), rows)));
  }
  show(h("h1", {}, file.label), h("p", { class: "muted" }, `${data.episodes} episodes in ${data.groups.length} groups`,
    data.estimator ? ` · advantages from ${data.estimator}` : "", data.bad_lines ? ` · ${data.bad_lines} unreadable line(s) skipped` : ""),
  h("div", { class: "card filters" }, ...radios, h("label", {}, invalid, " with invalid steps"), cat, cmp,
    h("span", { class: "muted", "data-testid": "shown" }, `showing ${shown} of ${data.episodes} episodes`)),
  groups.length ? h("div", {}, groups) : h("p", { class: "muted" }, "no episode matches the filters"));
}

// --- one episode, step by step --------------------------------------------------------------------------
function tokensView(step) {
  const n = Math.max(step.logprobs.length, step.response_ids.length);
  if (!n) return longText(step.text);
  const box = h("div", { class: "tokens", "data-testid": "tokens" });
  for (let k = 0; k < n; k++) {
    const lp = step.logprobs[k];
    const id = step.response_ids[k];
    const text = step.tokens && typeof step.tokens[k] === "string" ? step.tokens[k] : `⟨${id}⟩`;
    const p = typeof lp === "number" ? Math.exp(lp) : null;
    const span = h("span", { class: "tok", "data-lp": lp ?? "", "data-tip": `token ${k} (id ${id}) ${JSON.stringify(text)}\nlogprob ${typeof lp === "number" ? lp.toFixed(4) : "n/a"}   p = ${p === null ? "n/a" : p.toFixed(3)}` }, text);
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

function stepCard(ep, step, links) {
  const card = h("div", { class: "step" + (step.action_valid ? "" : " invalid"), "data-testid": "step", "data-step": step.t,
    "data-episode": ep.index, "data-anchor-group": step.anchor_group, "data-shared": step.anchor_members.length > 1 ? "1" : "0" });
  if (step.anchor_members.length > 1) card.style.setProperty("--hl", anchorColor(step.anchor_group));
  const others = step.anchor_members.filter(([e, t]) => !(e === ep.index && t === step.t));
  card.append(...[
    h("div", { class: "step-head" }, h("span", { class: "t" }, `t=${step.t}`), anchorBadge(step, ep.index),
      h("span", { class: "mono" }, step.action === null ? "(no action parsed)" : step.action),
      step.action_valid ? pill("valid", "ok") : pill("invalid", "bad"),
      h("span", {}, "reward ", h("span", { class: "mono", "data-testid": "reward" }, num(step.reward, 3))),
      step.progress !== null && step.progress !== undefined ? h("span", { class: "muted" }, `progress ${num(step.progress, 2)}`) : null,
      advantageView(step)),
    links && others.length ? h("div", { class: "muted" }, "same state: ",
      others.slice(0, 12).map(([e, t], k) => [k ? ", " : "", e === ep.index ? `t=${t}` : h("a", { href: links(e) }, `episode ${e} t=${t}`)]),
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

function episodeHeader(ep) {
  return h("div", { class: "card" },
    h("div", { class: "step-head" }, outcomePill(ep), h("span", {}, `score ${num(ep.score, 3)}`), h("span", {}, `${ep.num_steps} steps`),
      h("span", { class: ep.invalid ? "bad" : "" }, `${ep.invalid} invalid`), h("span", {}, `return ${num(ep.return, 3)}`),
      ep.truncated ? pill("truncated", "warn") : null, ep.category ? pill(ep.category) : null),
    h("p", {}, h("strong", {}, "instruction: "), ep.instruction),
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
  const steps = h("div", { class: "steps", "data-testid": "steps" },
    ep.steps.filter((st) => !onlyInvalid || !st.action_valid).map((st) => stepCard(ep, st, (e) => `#/s/${si}/f/${fi}/e/${e}`)));
  wireAnchors(steps);
  show(h("h1", {}, `Episode ${ei}`), episodeHeader(ep),
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
