// The areamem inspector: plain JavaScript, no build step, nothing from another origin.
//
// Every datum comes from the /memory API of this origin, called with the key kept in this
// tab's sessionStorage. Stored memory is hostile (a fragment may hold "<script>"): text
// from the API only ever enters the page as text nodes, attribute values or canvas labels,
// never as markup (no HTML-parsing sink anywhere). Every API error is shown in its panel.
"use strict";

(() => {
  const KEY_STORE = "areamem.key";
  const KIND_COLOURS = {
    fragment: "#4e79a7",
    context: "#f28e2b",
    entity: "#e15759",
    word: "#76b7b2",
    session: "#59a14f",
  };
  const FOCUS_COLOURS = [
    "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e",
    "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
  ];
  const EDGE_STYLES = {
    mentions: ["solid", "#9c755f"],
    in_context: ["dashed", "#f28e2b"],
    relation: ["solid", "#e15759"],
    next: ["dotted", "#4e79a7"],
    answers: ["solid", "#4e79a7"],
    corrects: ["solid", "#b07aa1"],
    depends_on: ["dashed", "#4e79a7"],
    in_session: ["dotted", "#59a14f"],
    at_time: ["dotted", "#bab0ac"],
    is_a: ["dashed", "#e15759"],
    uses_term: ["dotted", "#76b7b2"],
    related_context: ["dashed", "#f28e2b"],
  };
  const OTHER_EDGE = ["solid", "#999999"];

  const $ = (id) => document.getElementById(id);
  const state = { cy: null, question: null, snapshots: [], pendingRollback: null };

  // --- DOM: text in as text -------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "class") node.className = value;
      else if (name === "dataset") Object.assign(node.dataset, value);
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function clear(node) {
    node.replaceChildren();
    return node;
  }

  const norm = (text) => String(text ?? "").replace(/\s+/g, " ").trim().toLowerCase();
  const cut = (text, n) => {
    const s = String(text ?? "");
    return s.length > n ? s.slice(0, n - 1) + "…" : s;
  };
  const num = (x, digits = 3) => (typeof x === "number" && isFinite(x) ? x.toFixed(digits) : "–");
  const score = (x) =>
    typeof x === "number" && isFinite(x) ? (x !== 0 && Math.abs(x) < 0.01 ? x.toExponential(2) : x.toFixed(3)) : "–";
  const when = (seconds) =>
    typeof seconds === "number" && isFinite(seconds)
      ? new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC"
      : "unknown time";

  // --- the API ----------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
    toString() {
      const head = this.status ? `${this.status}${this.code ? " " + this.code : ""}` : this.code;
      return `${head}: ${this.message}`;
    }
  }

  async function api(path, options = {}) {
    const headers = new Headers();
    const key = sessionStorage.getItem(KEY_STORE);
    if (key) headers.set("Authorization", "Bearer " + key);
    const init = { method: options.method || "GET", headers, credentials: "omit", cache: "no-store" };
    if (options.body !== undefined) {
      headers.set("Content-Type", "application/json");
      init.body = JSON.stringify(options.body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (err) {
      throw new ApiError(0, "network", `${path}: the proxy could not be reached (${err.message})`);
    }
    const text = await response.text();
    let body = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch (_) {
      body = null;
    }
    if (!response.ok) {
      const error = body && typeof body === "object" ? body.error : null;
      const message =
        error && typeof error.message === "string" ? error.message : cut(text, 300) || response.statusText;
      throw new ApiError(response.status, error && error.code ? String(error.code) : "", message);
    }
    if (body === null || typeof body !== "object") {
      throw new ApiError(response.status, "not_json", `${path}: the answer is not a JSON object`);
    }
    return body;
  }

  const query = (params) => new URLSearchParams(params).toString();

  function showError(id, err) {
    const box = $(id);
    box.textContent = err instanceof ApiError ? err.toString() : `error: ${err && err.message ? err.message : err}`;
    box.hidden = false;
  }

  function hideError(id) {
    const box = $(id);
    box.textContent = "";
    box.hidden = true;
  }

  async function guarded(errorId, work) {
    hideError(errorId);
    try {
      await work();
    } catch (err) {
      showError(errorId, err);
    }
  }

  // --- the key ----------------------------------------------------------------------------

  function showKeyState() {
    $("key-state").textContent = sessionStorage.getItem(KEY_STORE)
      ? "key set (this tab only)"
      : "no key (auth.mode open needs none)";
  }

  function useKey(event) {
    event.preventDefault();
    const key = $("key").value.trim();
    if (key) sessionStorage.setItem(KEY_STORE, key);
    else sessionStorage.removeItem(KEY_STORE);
    $("key").value = "";
    showKeyState();
    refreshAll();
  }

  function forgetKey() {
    sessionStorage.removeItem(KEY_STORE);
    $("key").value = "";
    showKeyState();
  }

  // --- a block of injected text with its citations ----------------------------------------

  // A view pairs an injected block with the fragments its citations name; the search's
  // view also selects the fragment's node in the graph.
  function makeView(pre, list, onSelect) {
    return { pre, list, onSelect, citations: new Map() };
  }

  function renderBlock(view, text, citations) {
    view.citations = citations;
    clear(view.pre);
    const pattern = /\[(\d+)\]/g;
    let last = 0;
    for (const match of text.matchAll(pattern)) {
      const number = Number(match[1]);
      if (match.index > last) view.pre.append(text.slice(last, match.index));
      const fragment = citations.get(number);
      const link = el(
        "a",
        {
          href: `#${view.list.id}`,
          class: fragment === undefined ? "citation unknown" : "citation",
          title: fragment === undefined ? "no fragment found for this citation" : `fragment ${fragment}`,
          dataset: { citation: String(number), fragmentId: fragment === undefined ? "" : String(fragment) },
        },
        match[0]
      );
      link.addEventListener("click", (event) => {
        event.preventDefault();
        selectFragment(view, fragment, number);
      });
      view.pre.append(link);
      last = match.index + match[0].length;
    }
    if (last < text.length) view.pre.append(text.slice(last));
    if (!text) view.pre.append(el("span", { class: "muted" }, "(nothing would be injected)"));
  }

  function fragmentItem(fragment, extra) {
    const who = fragment.speaker || fragment.role || "unknown";
    return el(
      "li",
      { class: "fragment", dataset: { fragmentId: String(fragment.id) } },
      el(
        "div",
        { class: "meta" },
        el("strong", {}, `#${fragment.id}`),
        ` ${who} · ${fragment.conversation_id ?? "?"} · ${when(fragment.ts)}`,
        fragment.score !== undefined ? ` · score ${score(fragment.score)}` : "",
        extra || ""
      ),
      el("p", { class: "text" }, fragment.text ?? "")
    );
  }

  function selectFragment(view, fragment, number) {
    for (const node of view.list.querySelectorAll(".selected")) node.classList.remove("selected");
    for (const node of view.pre.querySelectorAll("a.citation.active")) node.classList.remove("active");
    for (const node of view.pre.querySelectorAll(`a.citation[data-citation="${CSS.escape(String(number))}"]`)) {
      node.classList.add("active");
    }
    if (fragment === undefined) return;
    let item = view.list.querySelector(`li[data-fragment-id="${CSS.escape(String(fragment))}"]`);
    if (!item) {
      item = el(
        "li",
        { class: "fragment missing", dataset: { fragmentId: String(fragment) } },
        el("div", { class: "meta" }, el("strong", {}, `#${fragment}`), " cited, not among the hits")
      );
      view.list.append(item);
    }
    item.classList.add("selected");
    item.scrollIntoView({ block: "nearest" });
    if (view.onSelect) view.onSelect(fragment);
  }

  // [n] -> fragment id. The API's own map when it gives one; else read from the block's
  // numbered fragment lines ("[n] Speaker: text", sentences elided as "…"), each matched to
  // the fragment whose text holds every kept piece (the speaker breaks ties).
  function citationMap(given, text, candidates) {
    const map = new Map();
    if (Array.isArray(given)) {
      for (const c of given) map.set(c.number, c.fragment_id);
      return map;
    }
    let inFragments = false;
    for (const line of text.split("\n")) {
      if (line === "Fragments:") inFragments = true;
      else if (line === "Notes:") inFragments = false;
      const m = /^\[(\d+)\] (.*)$/.exec(line);
      if (!m || !inFragments) continue;
      const id = matchLine(m[2], candidates);
      if (id !== null) map.set(Number(m[1]), id);
    }
    return map;
  }

  function matchLine(body, candidates) {
    const line = body.replace(/ \(corrected by \[\d+\](?:, \[\d+\])*\)$/, "");
    const colon = line.indexOf(": ");
    const label = colon >= 0 ? norm(line.slice(0, colon)) : "";
    const said = colon >= 0 ? line.slice(colon + 2) : line;
    const pieces = said.split("…").map(norm).filter((p) => p.length > 0);
    let best = null;
    let bestScore = 0;
    for (const c of candidates) {
      const text = norm(c.text);
      const holds = c.prefix
        ? pieces.length > 0 && (pieces[0].startsWith(text) || text.startsWith(pieces[0]))
        : pieces.every((p) => text.includes(p));
      if (!holds) continue;
      const score = 1 + (norm(c.label) === label ? 2 : 0) + (c.prefix ? 0 : 1);
      if (score > bestScore) {
        best = c.id;
        bestScore = score;
      }
    }
    return best;
  }

  // --- search -----------------------------------------------------------------------------

  const searchView = () =>
    state.searchView || (state.searchView = makeView($("context"), $("fragments"), selectNode));

  async function search(event) {
    if (event) event.preventDefault();
    const question = $("q").value;
    if (!question.trim()) return;
    const k = $("k").value || "8";
    state.question = question;
    hideError("search-error");
    hideError("area-error");
    const params = query({ q: question, k });
    const [found, area] = await Promise.allSettled([
      api(`/memory/search?${params}`),
      api(`/memory/area?${params}`),
    ]);
    const explained = area.status === "fulfilled" ? area.value : null;
    if (found.status === "fulfilled") showSearch(found.value, explained);
    else {
      showError("search-error", found.reason);
      clear($("context"));
      clear($("fragments"));
    }
    if (explained) drawArea(explained);
    else {
      showError("area-error", area.reason);
      drawArea(null);
    }
  }

  function showSearch(found, explained) {
    const view = searchView();
    const ranked = new Map(((explained && explained.fragments) || []).map((f) => [f.id, f]));
    clear(view.list);
    for (const hit of found.hits) {
      const fragment = { ...hit, id: hit.fragment_id };
      const terms = ranked.get(hit.fragment_id);
      const extra = terms
        ? " · area " + Object.entries(terms.terms).map(([t, v]) => `${t} ${num(v, 2)}`).join(", ")
        : "";
      view.list.append(fragmentItem(fragment, extra));
    }
    if (!found.hits.length) view.list.append(el("li", { class: "muted" }, "no fragment found"));
    const candidates = found.hits.map((h) => ({ id: h.fragment_id, label: h.speaker || h.role, text: h.text }));
    for (const node of (explained && explained.area && explained.area.nodes) || []) {
      if (node.kind !== "fragment") continue;
      const colon = node.label.indexOf(": ");
      candidates.push({
        id: node.id,
        label: colon >= 0 ? node.label.slice(0, colon) : "",
        text: (colon >= 0 ? node.label.slice(colon + 2) : node.label).replace(/…$/, ""),
        prefix: true,
      });
    }
    renderBlock(view, found.context, citationMap(found.citations, found.context, candidates));
    $("context-meta").textContent =
      `${found.tokens} tokens · ${found.hits.length} fragments · terms: ${found.terms.join(", ")} · ${num(found.elapsed_ms, 1)} ms`;
  }

  // --- the area ---------------------------------------------------------------------------

  function areaElements(explained) {
    const area = explained.area;
    const foci = explained.foci;
    const totals = area.nodes.map((n) => Object.values(n.per_focus).reduce((a, b) => a + b, 0));
    const top = Math.max(...totals, 1e-12);
    const nodes = area.nodes.map((n, i) => {
      const entries = Object.entries(n.per_focus);
      const [dominant, strongest] = entries.reduce((a, b) => (b[1] > a[1] ? b : a), ["", -1]);
      const share = totals[i] > 0 ? strongest / totals[i] : 0;
      const focusIndex = foci.indexOf(dominant);
      return {
        data: {
          id: `n${n.node}`,
          node: n.node,
          kind: n.kind,
          label: cut(n.label, 28),
          full: n.label,
          fragment: n.kind === "fragment" ? n.id : null,
          activation: totals[i] / top,
          total: totals[i],
          dominant,
          share,
          colour: KIND_COLOURS[n.kind] || "#999999",
          ring: focusIndex >= 0 ? FOCUS_COLOURS[focusIndex % FOCUS_COLOURS.length] : "#333333",
          rep: n.node === area.representative.node ? 1 : 0,
        },
      };
    });
    const present = new Set(area.nodes.map((n) => n.node));
    const edges = area.edges
      .filter((e) => present.has(e.src) && present.has(e.dst))
      .map((e, i) => {
        const [line, colour] = EDGE_STYLES[e.type] || OTHER_EDGE;
        return {
          data: { id: `e${i}`, source: `n${e.src}`, target: `n${e.dst}`, type: e.type, line, colour },
        };
      });
    return { nodes, edges };
  }

  function graphStyle() {
    return [
      {
        selector: "node",
        style: {
          "background-color": "data(colour)",
          "border-color": "data(ring)",
          "border-width": "mapData(share, 0, 1, 2, 6)",
          width: "mapData(activation, 0, 1, 16, 56)",
          height: "mapData(activation, 0, 1, 16, 56)",
          opacity: "mapData(activation, 0, 1, 0.35, 1)",
          label: "data(label)",
          "font-size": 9,
          color: "#222222",
          "text-valign": "bottom",
          "text-margin-y": 3,
          "text-wrap": "ellipsis",
          "text-max-width": 120,
        },
      },
      {
        selector: "node[rep = 1]",
        style: {
          "border-style": "double",
          "border-width": 7,
          "underlay-color": "#000000",
          "underlay-opacity": 0.18,
          "underlay-padding": 7,
          "underlay-shape": "ellipse",
          "font-weight": "bold",
        },
      },
      {
        selector: "node:selected",
        style: { "overlay-color": "#ffcc00", "overlay-opacity": 0.45, "overlay-padding": 6 },
      },
      {
        selector: "edge",
        style: {
          "line-color": "data(colour)",
          "line-style": "data(line)",
          width: 1.5,
          opacity: 0.7,
          "curve-style": "bezier",
          "target-arrow-shape": "triangle",
          "target-arrow-color": "data(colour)",
          "arrow-scale": 0.6,
        },
      },
    ];
  }

  function drawArea(explained) {
    const box = $("graph");
    if (state.cy) {
      state.cy.destroy();
      state.cy = null;
    }
    clear(box);
    clear($("area-nodes"));
    clear($("legend"));
    box.dataset.selectedFragment = "";
    if (!explained || !explained.area) {
      box.dataset.state = explained ? "none" : "error";
      box.dataset.nodeCount = "0";
      box.dataset.edgeCount = "0";
      $("area-summary").textContent = explained
        ? `No area: the question's foci (${explained.foci.join(", ") || "none"}) reach nothing in memory.`
        : "";
      return;
    }
    const { nodes, edges } = areaElements(explained);
    listNodes(nodes);
    drawLegend(explained, edges);
    summarise(explained);
    if (typeof window.cytoscape !== "function") {
      box.dataset.state = "error";
      showError("area-error", new Error("cytoscape.js did not load (proxy/static/ui/vendor: make vendor-ui)"));
      return;
    }
    const cy = window.cytoscape({
      container: box,
      elements: { nodes, edges },
      style: graphStyle(),
      layout: {
        name: "concentric",
        concentric: (n) => (n.data("rep") ? 2 : n.data("activation")),
        levelWidth: () => 0.25,
        minNodeSpacing: 24,
        animate: false,
      },
      selectionType: "single",
    });
    cy.on("tap", "node", (event) => {
      const fragment = event.target.data("fragment");
      if (fragment !== null) selectFragment(searchView(), fragment, null);
      markNode(event.target.data("node"));
    });
    state.cy = cy;
    box.dataset.nodeCount = String(cy.nodes().length);
    box.dataset.edgeCount = String(cy.edges().length);
    box.dataset.state = "drawn";
  }

  function listNodes(nodes) {
    const list = $("area-nodes");
    for (const { data } of nodes) {
      const item = el(
        "li",
        { class: data.rep ? "node rep" : "node", dataset: { node: String(data.node), kind: data.kind } },
        el("span", { class: "swatch" }),
        data.rep ? "★ " : "",
        el("strong", {}, data.kind),
        " ",
        data.full,
        el("span", { class: "muted" }, ` · activation ${num(data.total)} · mostly ${data.dominant || "–"}`)
      );
      item.firstChild.style.background = data.colour;
      item.firstChild.style.borderColor = data.ring;
      item.addEventListener("click", () => {
        if (data.fragment !== null) selectFragment(searchView(), data.fragment, null);
        else selectNode(null, data.node);
      });
      list.append(item);
    }
  }

  function drawLegend(explained, edges) {
    const legend = $("legend");
    const row = (colour, text, ring) => {
      const swatch = el("span", { class: ring ? "swatch ring" : "swatch" });
      if (ring) swatch.style.borderColor = colour;
      else swatch.style.background = colour;
      return el("li", {}, swatch, text);
    };
    legend.append(el("h4", {}, "Foci (ring)"));
    legend.append(el("ul", {}, explained.foci.map((f, i) => row(FOCUS_COLOURS[i % FOCUS_COLOURS.length], f, true))));
    legend.append(el("h4", {}, "Kinds (fill)"));
    legend.append(el("ul", {}, Object.entries(KIND_COLOURS).map(([k, c]) => row(c, k, false))));
    const types = [...new Set(edges.map((e) => e.data.type))].sort();
    legend.append(el("h4", {}, "Edges"));
    legend.append(
      el("ul", {}, types.map((t) => {
        const [line, colour] = EDGE_STYLES[t] || OTHER_EDGE;
        const sample = el("span", { class: `edge-sample ${line}` });
        sample.style.borderColor = colour;
        return el("li", {}, sample, t);
      }))
    );
    legend.append(el("p", { class: "muted" }, "★ double ring: the representative · size and opacity: activation"));
  }

  function summarise(explained) {
    const area = explained.area;
    const s = area.score;
    const rep = area.representative;
    $("area-summary").textContent =
      `graph v${explained.graph_version} (${explained.graph.nodes} nodes) · region of ${area.nodes.length} nodes, ` +
      `${area.edges.length} edges · representative: ${rep.kind} ${cut(rep.label, 60)} · score ${num(s.score)} ` +
      `(coverage ${num(s.coverage, 2)}, convergence ${num(s.convergence, 2)}, mass ${num(s.mass, 2)}, ` +
      `support ${num(s.support, 2)}) · foci: ${explained.foci.join(", ")}`;
  }

  function selectNode(fragment, nodeIndex) {
    const cy = state.cy;
    $("graph").dataset.selectedFragment = fragment === null || fragment === undefined ? "" : String(fragment);
    if (!cy) return;
    cy.elements().unselect();
    const found =
      nodeIndex !== undefined && nodeIndex !== null
        ? cy.getElementById(`n${nodeIndex}`)
        : cy.nodes().filter((n) => n.data("fragment") === fragment);
    if (found.length) {
      found.select();
      markNode(found[0].data("node"));
    } else markNode(null);
  }

  function markNode(nodeIndex) {
    for (const item of $("area-nodes").querySelectorAll("li.selected")) item.classList.remove("selected");
    if (nodeIndex === null || nodeIndex === undefined) return;
    const item = $("area-nodes").querySelector(`li[data-node="${CSS.escape(String(nodeIndex))}"]`);
    if (item) item.classList.add("selected");
  }

  // --- receipts ---------------------------------------------------------------------------

  async function loadReceipts() {
    await guarded("receipts-error", async () => {
      const body = await api(`/memory/receipts?${query({ limit: 20 })}`);
      const rows = clear($("receipts").tBodies[0]);
      for (const r of body.receipts) {
        const open = el("button", { type: "button", class: "link" }, r.id);
        open.addEventListener("click", () => showReceipt(r.id));
        rows.append(
          el(
            "tr",
            { class: r.memory_error ? "problem" : null },
            el("td", {}, when(r.created_at)),
            el("td", {}, open),
            el("td", {}, r.model),
            el("td", { title: r.memory_error || "" }, `${r.retrieve ? "retrieved" : "skipped"}: ${r.reason}`,
              r.memory_error ? ` (memory error: ${r.memory_error})` : ""),
            el("td", { title: "found by retrieval / shown in the block / cited by number" },
              `${r.fragments} / ${r.shown ?? 0} / ${r.cited ?? 0}`),
            el("td", {}, String(r.tokens))
          )
        );
      }
      if (!body.receipts.length) {
        rows.append(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "No receipts yet: a chat request that consults memory leaves one.")));
      }
    });
  }

  // One meaning everywhere: shown = the block has its line; cited = the block numbers it.
  // A receipt kept from before the split says `cited` where it means shown.
  function shownMark(f) {
    if (f.number !== undefined && f.number !== null) return ` · shown, cited [${f.number}]`;
    return (f.shown ?? f.cited) ? " · shown" : "";
  }

  async function showReceipt(id) {
    $("receipt-detail").hidden = false;
    $("receipt-title").textContent = `Receipt ${id}`;
    const view = state.receiptView || (state.receiptView = makeView($("receipt-context"), $("receipt-fragments"), null));
    clear(view.pre);
    clear(view.list);
    await guarded("receipt-error", async () => {
      const r = await api(`/memory/receipts/${encodeURIComponent(id)}`);
      $("receipt-title").textContent =
        `Receipt ${r.id} · ${r.model} · ${when(r.created_at)} · ${r.decision.reason} · ${r.tokens} tokens`;
      for (const f of r.area.fragments) view.list.append(fragmentItem(f, shownMark(f)));
      renderBlock(view, r.injected_text, citationMap(r.citations, r.injected_text, []));
    });
  }

  // --- entities and relations -------------------------------------------------------------

  async function loadEntities() {
    await guarded("entities-error", async () => {
      const body = await api(`/memory/entities?${query({ limit: 200 })}`);
      const rows = clear($("entities").tBodies[0]);
      for (const e of body.entities) {
        rows.append(
          el(
            "tr",
            { dataset: { entity: String(e.id) } },
            el("td", {}, el("strong", {}, e.name), e.is_speaker ? el("span", { class: "badge" }, "speaker") : ""),
            el("td", {}, e.label),
            el("td", {}, String(e.mentions)),
            el("td", {}, e.aliases.map((a) =>
              el("span", { class: "chip", title: `from ${a.source}` }, a.alias, a.lang ? ` (${a.lang})` : ""))),
            el("td", {}, e.contexts.map((c) => el("span", { class: "chip" }, `${c.label} ×${c.mentions}`)))
          )
        );
      }
      if (!body.entities.length) rows.append(el("tr", {}, el("td", { colspan: 5, class: "muted" }, "No entities yet.")));
    });
  }

  async function loadRelations(event) {
    if (event) event.preventDefault();
    await guarded("relations-error", async () => {
      const params = { limit: 500 };
      const entity = $("relations-entity").value.trim();
      if (entity) params.entity = entity;
      const body = await api(`/memory/relations?${query(params)}`);
      const rows = clear($("relations").tBodies[0]);
      for (const r of body.relations) {
        const kind = r.mutation.kind || "none";
        const mutation = [kind];
        if (r.mutation.other !== null) mutation.push(` of #${r.mutation.other}`);
        const source = r.source;
        rows.append(
          el(
            "tr",
            { class: `mutation-${kind} status-${r.status}`, dataset: { relation: String(r.id), mutation: kind } },
            el("td", {}, String(r.id)),
            el("td", {}, r.subject),
            el("td", {}, r.predicate),
            el("td", {}, r.object ?? "–"),
            el("td", {}, r.status),
            el("td", { title: r.mutation.reason || "" }, mutation.join(""),
              r.mutation.reason ? el("div", { class: "muted" }, r.mutation.reason) : ""),
            el("td", {}, num(r.confidence, 2)),
            el("td", { title: source.fragment_text }, `#${source.fragment_id} ${source.speaker || ""}: ${cut(source.fragment_text, 100)}`)
          )
        );
      }
      if (!body.relations.length) rows.append(el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No relations.")));
    });
  }

  // --- snapshots, diff, rollback ----------------------------------------------------------

  function describeSnapshot(s) {
    const what = s.kind === "rollback" && s.target !== null ? `rollback to #${s.target}` : s.kind;
    return `snapshot #${s.id} (${what}, ${when(s.created_at)}${s.trigger ? ", trigger " + s.trigger : ""})`;
  }

  async function loadSnapshots() {
    await guarded("history-error", async () => {
      const body = await api(`/memory/snapshots?${query({ limit: 50 })}`);
      state.snapshots = body.snapshots;
      $("history-state").textContent =
        `head ${body.head === null ? "none" : "#" + body.head} · generation ${body.generation} · ` +
        `${body.held} held messages · ${body.journal_entries} writes since the head` +
        (body.last_rollback_at ? ` · last rollback ${when(body.last_rollback_at)}` : "");
      const rows = clear($("snapshots").tBodies[0]);
      for (const s of body.snapshots) {
        const back = el("button", { type: "button", class: "danger", dataset: { snapshot: String(s.id) } }, `Roll back to #${s.id}`);
        back.addEventListener("click", () => askRollback(s));
        const decisions = Object.entries(s.decisions).map(([k, v]) => `${k} ${v}`).join(", ");
        rows.append(
          el(
            "tr",
            { dataset: { snapshot: String(s.id) }, class: s.id === body.head ? "head" : null },
            el("td", {}, `#${s.id}`),
            el("td", {}, s.kind === "rollback" && s.target !== null ? `rollback → #${s.target}` : s.kind),
            el("td", {}, when(s.created_at)),
            el("td", {}, s.trigger || "–"),
            el("td", {}, String(s.rows_changed)),
            el("td", {}, decisions || "–"),
            el("td", {}, back)
          )
        );
      }
      if (!body.snapshots.length) {
        rows.append(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "No snapshots yet: a consolidation cycle (POST /memory/dream) takes one.")));
      }
      fillDiffChoices(body.snapshots);
    });
  }

  function fillDiffChoices(snapshots) {
    const from = clear($("diff-from"));
    const to = clear($("diff-to"));
    for (const s of snapshots) {
      from.append(el("option", { value: s.id }, `#${s.id} ${s.kind}`));
      to.append(el("option", { value: s.id }, `#${s.id} ${s.kind}`));
    }
    if (snapshots.length > 1) from.value = String(snapshots[1].id);
  }

  async function showDiff(event) {
    event.preventDefault();
    const a = $("diff-from").value;
    const b = $("diff-to").value;
    const box = clear($("diff"));
    if (!a || !b) return;
    await guarded("history-error", async () => {
      const d = await api(`/memory/snapshots/${encodeURIComponent(a)}/diff/${encodeURIComponent(b)}`);
      box.append(el("h3", {}, `From #${d.from_snapshot} to #${d.to_snapshot}: ${d.rows_changed} rows differ`));
      for (const name of ["entities", "relations", "contexts"]) box.append(diffSection(name, d[name]));
    });
  }

  function diffSection(name, section) {
    const t = section.totals;
    const list = el("ul", { class: "diff" });
    const show = (sign, cls, rows) => {
      for (const row of rows) {
        const detail = cls === "changed"
          ? Object.entries(row.values).map(([col, v]) =>
              `${col}: ${JSON.stringify(Array.isArray(v) ? v[0] : v)} → ${JSON.stringify(Array.isArray(v) ? v[1] : v)}`).join("; ")
          : "";
        const sources = row.sources.map((s) => `#${s.fragment_id} ${s.speaker || ""}: ${cut(s.text, 80)}`).join(" | ");
        list.append(el("li", { class: cls, title: sources }, `${sign} ${row.label}`, detail ? el("span", { class: "muted" }, ` (${detail})`) : ""));
      }
    };
    show("+", "added", section.added);
    show("−", "removed", section.removed);
    show("~", "changed", section.changed);
    if (!list.childElementCount) list.append(el("li", { class: "muted" }, "no difference"));
    return el("section", { class: "diff-section" },
      el("h4", {}, `${name}: +${t.added ?? 0} −${t.removed ?? 0} ~${t.changed ?? 0}`), list);
  }

  function askRollback(snapshot) {
    state.pendingRollback = snapshot;
    $("rollback-question").textContent = `Roll memory back to ${describeSnapshot(snapshot)}?`;
    $("rollback-reform").checked = false;
    $("rollback-dialog").showModal();
  }

  function closeRollback(confirmed) {
    const snapshot = state.pendingRollback;
    const reform = $("rollback-reform").checked;
    state.pendingRollback = null;
    $("rollback-dialog").close(confirmed ? "confirm" : "cancel");
    if (confirmed && snapshot) rollback(snapshot, reform);
  }

  async function rollback(snapshot, reform) {
    const notice = $("rollback-result");
    notice.hidden = true;
    await guarded("history-error", async () => {
      const r = await api("/memory/rollback", { method: "POST", body: { snapshot: snapshot.id, reform } });
      notice.textContent =
        `Memory restored to snapshot #${r.restored} (recorded as snapshot #${r.snapshot}): ` +
        `${r.rows_changed} rows changed, ${r.held} messages held` +
        (reform ? `, ${r.reformed} formed again` : "") + ".";
      notice.hidden = false;
    });
    refreshAll();
    if (state.question) search(null);
  }

  // --- start ------------------------------------------------------------------------------

  function refreshAll() {
    loadReceipts();
    loadEntities();
    loadRelations(null);
    loadSnapshots();
  }

  function start() {
    $("key-form").addEventListener("submit", useKey);
    $("key-forget").addEventListener("click", forgetKey);
    $("search-form").addEventListener("submit", search);
    $("receipts-refresh").addEventListener("click", loadReceipts);
    $("entities-refresh").addEventListener("click", loadEntities);
    $("relations-refresh").addEventListener("click", () => loadRelations(null));
    $("relations-form").addEventListener("submit", loadRelations);
    $("snapshots-refresh").addEventListener("click", loadSnapshots);
    $("diff-form").addEventListener("submit", showDiff);
    $("rollback-cancel").addEventListener("click", () => closeRollback(false));
    $("rollback-confirm").addEventListener("click", () => closeRollback(true));
    $("rollback-dialog").addEventListener("cancel", () => {
      state.pendingRollback = null;
    });
    showKeyState();
    refreshAll();
    document.body.dataset.ready = "1";
  }

  start();
})();
