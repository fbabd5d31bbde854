// The report's conversations (`convtap report`, `convtap serve`): the page holds them as data,
// each request of each conversation (a step) as JSON, and draws only the rows in view: a
// conversation's head, a step's head, each item (a message, a call with its returns, a return
// answering no call, a finding on a request), as items.js draws them. The filters (severity,
// rule, tool, conversation, a text search; also read from the URL fragment:
// #rule=return-recipient&severity=error) run over the data, not over what is drawn.
(() => {
  "use strict";
  const KEYS = ["q", "severity", "rule", "tool", "conversation"];
  const HAS_BIDI = /[\u202a-\u202e\u2066-\u2069]/;
  const { shown, el, plural, prettyText, stepHead, convHead, LONG } = window.convtapItems;
  const form = document.getElementById("filters");
  const shownCount = document.getElementById("shown");
  const box = document.getElementById("rows");
  const slice = document.getElementById("slice");
  const steps = new Map();  // JSON [conversation, step] → step
  const convs = new Map();  // conversation key → {id, steps, first}
  let order = null;  // the conversations in page order (null: to be sorted again)
  let rows = [];  // what the filters let through, in page order
  let flags = new Uint8Array(0);  // for each row: 1 the last of its conversation, 2 a later step
  let filters = {};

  function draw(row, i) {
    let node;
    if (row.kind === "conv") {
      node = el("div", "row conv-row", convHead(row.conv));
      node.dataset.conv = shown(row.conv.id);
    } else if (row.kind === "step") {
      node = el("div", "row", el("article", `step${flags[i] & 2 ? " later" : ""}`, stepHead(row.step),
        row.step.x ? el("pre", "exchange", row.step.x.join("\n")) : null));
    } else {
      node = el("div", "row", el("div", "rail", window.convtapItems.item(row.item, hide)));
    }
    if (flags[i] & 1) node.classList.add("last");
    node.dataset.key = row.key;  // what it draws: a conversation, a step, an item of a step
    node.row = row;
    const open = owner(row)._open;
    if (open) [...node.getElementsByTagName("details")].forEach((d, n) => { d.open = Boolean(open[n]); });
    return node;
  }

  // -- the data -----------------------------------------------------------------------------

  const keyOf = (s) => JSON.stringify([s.c, s.s]);

  function counts(conv) {
    let calls = 0, found = 0;
    for (const s of conv.steps) {
      for (const it of s.i || []) {
        if (it.t === "c") {
          calls += 1;
          found += (it.f || []).length + it.r.reduce((n, r) => n + (r.f || []).length, 0);
        } else if (it.t === "r") found += (it.f || []).length;
        else if (it.t === "f") found += 1;
      }
    }
    conv.calls = calls;
    conv.findings = found;
  }

  const dirty = new Set();  // conversations whose steps changed since they were last sorted
  function touch(conv) {
    dirty.add(conv);
    entries = null;
  }

  function detach(key) {
    const old = steps.get(key);
    if (!old) return;
    steps.delete(key);
    const conv = convs.get(old.c);
    conv.steps = conv.steps.filter((s) => s !== old);
    if (!conv.steps.length) { convs.delete(old.c); order = null; }
    touch(conv);
  }

  // Steps in (new ones, or newer versions of ones held: `v` counts the server's readings).
  function add(list) {
    for (const s of list) {
      const key = keyOf(s);
      const old = steps.get(key);
      if (old && (old.v || 0) > (s.v || 0)) continue;
      if (gone.has(key) && gone.get(key) >= (s.v || 0)) continue;
      s.i = s.i || [];
      if (old) {  // a step grows: its items' heights and folds carry over
        old.i.forEach((it, n) => {
          const now = s.i[n];
          if (now && now.t === it.t && now.id === it.id) { now._h = it._h; now._open = it._open; }
        });
        if (old.c === s.c) {  // in its place
          const conv = convs.get(s.c);
          conv.steps[conv.steps.indexOf(old)] = s;
          steps.set(key, s);
          touch(conv);
          continue;
        }
      }
      detach(key);
      steps.set(key, s);
      let conv = convs.get(s.c);
      if (!conv) {
        convs.set(s.c, (conv = { id: s.c, steps: [], first: Infinity }));
        if (order) order.push(conv);  // placed when it is sorted
      }
      conv.steps.push(s);
      touch(conv);
    }
  }

  const gone = new Map();  // steps the server said are gone, with its reading then
  function remove(list) {
    for (const [key, v] of list) {
      const old = steps.get(key);
      if (!old || (old.v || 0) <= v) detach(key);
      gone.set(key, v);
    }
  }

  const byFirst = (a, b) => a.first - b.first || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

  // The conversations in page order; only those that changed are sorted again, and the order
  // only when one of them moved (a new conversation is most often the last).
  function sorted() {
    let moved = !order;
    for (const conv of dirty) {
      if (!convs.has(conv.id)) continue;
      conv.steps.sort((a, b) => a.at - b.at || (a.s < b.s ? -1 : a.s > b.s ? 1 : 0));
      const first = conv.steps.reduce((least, s) => Math.min(least, s.first ?? s.at), Infinity);
      moved = moved || first !== conv.first;
      conv.first = first;
      counts(conv);
      conv.entries = null;
    }
    dirty.clear();
    if (!order) order = [...convs.values()];
    else if (moved) order = order.filter((c) => convs.get(c.id) === c);
    if (moved) {
      let inOrder = true;
      for (let i = 1; i < order.length && inOrder; i += 1) inOrder = byFirst(order[i - 1], order[i]) <= 0;
      if (!inOrder) order.sort(byFirst);
    }
    return order;
  }

  // -- the filters --------------------------------------------------------------------------

  const hide = (f) => filters.byFinding && !findingOk(f);

  function findingOk(f) {
    return (!filters.rule || f.rule === filters.rule) && (!filters.severity || f.sev === filters.severity);
  }

  function itemFindings(it) {
    if (it._f) return it._f;
    if (it.t === "c") it._f = [...(it.f || []), ...it.r.flatMap((r) => r.f || [])];
    else if (it.t === "r") it._f = it.f || [];
    else it._f = it.t === "f" ? [it] : [];
    return it._f;
  }

  // What a text search reads in an item: its ids, names and texts, its returns' JSON and its
  // findings, lowercased once (the first search, or an idle moment after the page opened).
  function searchText(it) {
    if (it._q !== undefined) return it._q;
    const parts = [it.id, it.role, it.name, it.to, it.ch, it.st, it.ct, it.text, it.tool, it.proto,
      it.kind, it.item, it.args, it.mid, it.flow, it.bcid, it.json, it.rule, it.sev, it.msg, it.exp, it.act];
    for (const r of it.r || []) parts.push(r.id, r.mid, r.flow, r.json);
    for (const f of itemFindings(it)) if (f !== it) parts.push(f.rule, f.sev, f.msg, f.exp, f.act);
    const text = parts.filter((p) => p != null).join("\n");
    it._q = (HAS_BIDI.test(text) ? shown(text) : text).toLowerCase();
    return it._q;
  }

  function index(deadline) {  // the filters' facts and search text, a slice at a time when idle
    facets();
    for (const s of steps.values()) {
      if (s._q) continue;
      for (const it of s.i) searchText(it);
      s._q = true;
      if (deadline.timeRemaining() < 2) { requestIdleCallback(index); return; }
    }
    corpus();
    window.__convtapIndexedAt = performance.now();
  }

  // Every item's search text in one string, in page order, searched with indexOf (one call
  // finds the next hit however many items lie before it); `starts` maps a hit to its item,
  // `entry` the item to its entry (its row in `flat()`).
  let searchable = null;
  function corpus() {
    const all = flat();
    if (searchable && searchable.of === all) return searchable;
    const items = [];
    const entry = [];
    const texts = [];
    all.forEach((e, i) => {
      if (e.kind !== "item") return;
      items.push(e.item);
      entry.push(i);
      texts.push(searchText(e.item));
    });
    const starts = new Float64Array(items.length + 1);
    let at = 0;
    texts.forEach((t, n) => { starts[n] = at; at += t.length + 1; });
    starts[items.length] = at;
    searchable = { of: all, text: texts.join("\u0000"), starts, items, entry };
    return searchable;
  }

  // The items whose search text holds q (`items`), and their entries in page order (`at`): a
  // search looks at those only, as a filter on a rule does at its own items.
  function found(q) {
    const { text, starts, items, entry } = corpus();
    const hits = new Set();
    const at = [];
    for (let from = text.indexOf(q); from >= 0;) {
      let lo = 0, hi = items.length - 1;
      while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (starts[mid] <= from) lo = mid; else hi = mid - 1; }
      if (searchText(items[lo]).includes(q)) { hits.add(items[lo]); at.push(entry[lo]); }  // not across two items
      from = text.indexOf(q, starts[lo + 1]);
    }
    return { items: hits, at };
  }

  // Everything in page order, one entry a row: a conversation's head, a step's head, an item
  // (each with its height estimated). Made again for the conversations whose data changed; a
  // filter only picks entries from it.
  let entries = null;
  let itemCount = 0;
  function convEntries(conv) {
    if (conv.entries) return conv.entries;
    const out = [{ kind: "conv", conv, key: `c${JSON.stringify(conv.id)}` }];
    for (const s of conv.steps) {
      const key = keyOf(s);
      out.push({ kind: "step", step: s, key: `s${key}` });
      s.i.forEach((item, n) => out.push({ kind: "item", step: s, item, key: `i${key}${n}` }));
    }
    for (const e of out) e.h0 = guess(e);
    conv.entries = out;
    return out;
  }

  function flat() {
    if (entries && !dirty.size) return entries;
    entries = [];
    itemCount = 0;
    facetIndex = null;
    for (const conv of sorted()) {
      let head = 0, step = 0;
      for (const e of convEntries(conv)) {
        if (e.kind === "conv") head = entries.length;
        else if (e.kind === "step") step = entries.length;
        else { e.head = head; e.stepAt = step; }
        entries.push(e);
      }
      for (const s of conv.steps) itemCount += s.i.length;
    }
    return entries;
  }

  // The items of each rule, severity and tool (entry indices, in page order): a filter on one
  // of them looks at those items only.
  let facetIndex = null;
  function facets() {
    const all = flat();
    if (facetIndex) return facetIndex;
    facetIndex = new Map();
    const put = (key, i) => {
      const list = facetIndex.get(key);
      if (!list) facetIndex.set(key, [i]);
      else if (list[list.length - 1] !== i) list.push(i);
    };
    all.forEach((e, i) => {
      if (e.kind !== "item") return;
      for (const f of itemFindings(e.item)) { put(`r:${f.rule}`, i); put(`s:${f.sev}`, i); }
      if (e.item.tool) put(`t:${shown(e.item.tool)}`, i);
    });
    return facetIndex;
  }

  // What a filter lets through, picked from the entries: `out` (the rows) and `marks` (for
  // each, 1: its conversation's last row, 2: a step after the first one shown), and the counts.
  function Picked(size) {
    return { out: new Array(size), marks: new Uint8Array(size), count: 0, items: 0, calls: 0, found: 0,
      take(e, mark) { this.marks[this.count] = mark; this.out[this.count++] = e; } };
  }

  // How many findings of an item the filter asks for; -1 when the item is not shown.
  function matches(it, f, q) {
    let matched = 0;
    for (const fe of itemFindings(it)) if (findingOk(fe)) matched += 1;
    if (filters.byFinding && !matched) return -1;
    if (f.tool && (it._tool ?? (it._tool = shown(it.tool || ""))) !== f.tool) return -1;
    if (q && !(hits ? hits.has(it) : searchText(it).includes(q))) return -1;
    return matched;
  }
  let hits = null;  // the items a text search found (when every item is looked at)

  const convShown = (conv, f) => !f.conversation || (conv._shown ?? (conv._shown = shown(conv.id))).includes(f.conversation);

  function counted(p, it, matched) {
    p.items += 1;
    p.calls += it.t === "c" || it.t === "r" ? 1 : 0;
    p.found += matched;
  }

  // A filter on a rule, a severity, a tool or a text: only its items are looked at (the
  // shortest list of them), with their heads.
  function pickFacet(all, lists, f, q) {
    const shortest = lists.reduce((a, b) => (a.length <= b.length ? a : b));
    const p = Picked(Math.min(all.length, 3 * shortest.length));  // an item, its step, its head
    let head = -1, step = -1;
    for (const i of shortest) {
      const e = all[i];
      const matched = convShown(all[e.head].conv, f) ? matches(e.item, f, q) : -1;
      if (matched < 0) continue;
      if (e.head !== head) {
        if (head >= 0) p.marks[p.count - 1] |= 1;
        head = e.head;
        p.take(all[head], 0);
        step = -1;
      }
      if (e.stepAt !== step) {
        p.take(all[e.stepAt], step >= 0 ? 2 : 0);
        step = e.stepAt;
      }
      p.take(e, 0);
      counted(p, e.item, matched);
    }
    if (head >= 0) p.marks[p.count - 1] |= 1;
    return p;
  }

  // No filter but (perhaps) the conversation's: every entry of each conversation shown.
  function pickAll(all, f, p) {
    let convOk = false, laterStep = false;
    for (const e of all) {
      if (e.kind === "conv") {
        if (convOk) p.marks[p.count - 1] |= 1;
        convOk = convShown(e.conv, f);
        laterStep = false;
        if (convOk) p.take(e, 0);
      } else if (!convOk) continue;
      else if (e.kind === "step") {
        p.take(e, laterStep ? 2 : 0);
        laterStep = true;
      } else {
        p.take(e, 0);
        counted(p, e.item, matches(e.item, f, ""));
      }
    }
    if (convOk) p.marks[p.count - 1] |= 1;
  }

  function apply(f) {
    const started = performance.now();
    filters = { ...f, byFinding: Boolean(f.severity || f.rule) };
    const q = (f.q || "").trim().toLowerCase();
    const all = flat();
    const lists = [f.rule && `r:${f.rule}`, f.severity && `s:${f.severity}`, f.tool && `t:${f.tool}`]
      .filter(Boolean).map((key) => facets().get(key) || []);
    let p;
    if (lists.length) p = pickFacet(all, lists, f, q);
    else if (q) {  // only the items found, with their heads
      const search = found(q);
      hits = search.items;
      p = pickFacet(all, [search.at], f, q);
      hits = null;
    } else pickAll(all, f, (p = Picked(all.length)));
    p.out.length = p.count;
    rows = p.out;
    flags = p.marks;
    shownCount.textContent = KEYS.some((k) => f[k])
      ? `showing ${p.items} of ${itemCount} items: ${p.calls} ${p.calls === 1 ? "call or return" : "calls and returns"}, ${plural(p.found, "finding")}`
      : `${itemCount} items`;
    document.getElementById("nothing").hidden = convs.size > 0;
    list.show(rows);
    return performance.now() - started;
  }

  // -- the virtual list -----------------------------------------------------------------------

  // Where a row's measured height is kept: on what it draws, so that it outlives a filter.
  const owner = (row) => (row.kind === "conv" ? row.conv : row.kind === "step" ? row.step : row.item);

  const estimate = (row) => owner(row)._h || row.h0;

  function guess(row) {
    if (row.kind === "conv") return 56;
    if (row.kind === "step") return 40 + 18 * (row.step.x ? row.step.x.length : 0);
    const it = row.item;
    if (it.t === "m") return 44 + 20 * Math.ceil(Math.min((it.text || "").length, LONG) / 120);
    if (it.t === "c") return 150 + 18 * Math.min(30, Math.ceil(((it.r[0] && it.r[0].json) || "").length / 25));
    return 120;
  }

  const list = window.convtapList(box, slice, { estimate, draw, remember: (row, h) => { owner(row)._h = h; } });

  // What the reader unfolded stays unfolded when its row is drawn again.
  slice.addEventListener("toggle", (ev) => {
    const node = ev.target.closest(".row");
    if (node && node.row) owner(node.row)._open = [...node.getElementsByTagName("details")].map((d) => d.open);
  }, true);

  // -- the form and the URL fragment ----------------------------------------------------------

  function read() {
    const f = {};
    for (const k of KEYS) f[k] = form.elements[k].value;
    return f;
  }

  function write(f) {
    for (const k of KEYS) {
      const input = form.elements[k];
      const value = f[k] || "";
      if (input.tagName === "SELECT" && value && ![...input.options].some((o) => o.value === value)) {
        input.add(new Option(value, value));
      }
      input.value = value;
    }
  }

  function fromHash() {
    const raw = location.hash.slice(1);
    if (!raw.includes("=")) return null;  // an anchor (#rule-return-recipient), not filters
    const params = new URLSearchParams(raw);
    const f = {};
    for (const k of KEYS) f[k] = params.get(k) || "";
    f.conversation = f.conversation || params.get("conv") || "";
    return f;
  }

  function toHash(f) {
    const params = new URLSearchParams();
    for (const k of KEYS) if (f[k]) params.set(k, f[k]);
    const hash = params.toString();
    try {
      history.replaceState(null, "", hash ? `#${hash}` : location.pathname + location.search);
    } catch (e) { /* some browsers refuse it on file:// URLs: the filters still apply */ }
  }

  // The tools the data calls, offered in the tool filter (the page's own list comes first).
  function offerTools(from = steps.values()) {
    const select = form.elements.tool;
    const have = new Set([...select.options].map((o) => o.value));
    const found = new Set();
    for (const s of from) for (const it of s.i) if (it.tool && (it.t === "c" || (it.t === "r" && it.proto !== "responses"))) found.add(shown(it.tool));
    for (const tool of [...found].sort()) if (!have.has(tool)) select.add(new Option(tool, tool));
  }

  // A call named in the fragment (#call-ID): scrolled to once its row is known.
  function toCall() {
    const id = decodeURIComponent(location.hash.slice(1));
    if (!id.startsWith("call-")) return;
    const i = rows.findIndex((r) => r.kind === "item" && r.item.t === "c" && `call-${r.item.id}` === id);
    if (i >= 0) list.reveal(i, 60);
  }

  let timer = 0;
  const changed = () => { const f = read(); apply(f); toHash(f); };
  form.addEventListener("input", (ev) => {
    clearTimeout(timer);
    timer = setTimeout(changed, ev.target.name === "q" ? 150 : 0);
  });
  form.addEventListener("submit", (ev) => ev.preventDefault());
  form.addEventListener("reset", () => setTimeout(changed));
  window.addEventListener("hashchange", () => {
    const f = fromHash();
    if (f) { write(f); apply(f); } else toCall();
  });

  // What the live page's script calls: steps in and out, then drawn again with the filters kept
  // (those of the URL until the page is ready: then the form holds them).
  let isReady = false;
  window.convtap = {
    add, remove,
    draw() { apply(fromHash() || read()); },  // what is read so far, before the rest
    pretty: prettyText,  // JSON text as the page indents it
    refresh(added) { offerTools(added); apply(isReady ? read() : fromHash() || read()); },
    clear() { steps.clear(); convs.clear(); gone.clear(); order = null; entries = null; },
    ready() {
      document.getElementById("loading").hidden = true;
      offerTools();
      const initial = fromHash();
      if (initial) write(initial);
      apply(initial || read());
      toCall();
      window.__convtapReadyAt = performance.now();
      window.__convtapReady = isReady = true;
      if (window.requestIdleCallback) requestIdleCallback(index);
    },
  };
  window.convtapFilter = (f) => {
    const all = Object.fromEntries(KEYS.map((k) => [k, (f && f[k]) || ""]));
    write(all);
    return apply(all);
  };
})();
