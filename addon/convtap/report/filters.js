// Filters: severity, rule, tool, conversation and a text search, also read from the URL
// fragment (#rule=return-recipient&severity=error). Filtering toggles `hidden`; one listener
// per control kind (event delegation on the form), never one per element.
(() => {
  "use strict";
  const KEYS = ["q", "severity", "rule", "tool", "conversation"];
  const form = document.getElementById("filters");
  const shown = document.getElementById("shown");
  const convs = [];
  let total = 0;
  function index() {
    convs.length = 0;
    total = 0;
    for (const el of document.querySelectorAll("#timeline > .conv")) {
      const steps = [];
      for (const step of el.getElementsByClassName("step")) {
        const items = [];
        for (const item of step.lastElementChild.children) {
          items.push({ el: item, tool: item.dataset.tool || "", call: item.classList.contains("call"),
                       findings: item.getElementsByClassName("finding"), text: null });
          total += 1;
        }
        steps.push({ el: step, items });
      }
      convs.push({ el, id: el.dataset.conv || "", steps });
    }
  }

  const show = (el, yes) => { if (el.hidden === yes) el.hidden = !yes; };
  const text = (item) => item.text ?? (item.text = item.el.textContent.toLowerCase());

  function apply(f) {
    const started = performance.now();
    const q = (f.q || "").trim().toLowerCase();
    const byFinding = Boolean(f.severity || f.rule);
    const narrowing = byFinding || Boolean(f.tool || q);
    let items = 0, calls = 0, findings = 0;
    for (const c of convs) {
      const convOk = !f.conversation || c.id.includes(f.conversation);
      let anyStep = false;
      for (const s of c.steps) {
        let anyItem = false;
        for (const it of s.items) {
          let matched = 0;
          for (const fe of it.findings) {
            const ok = (!f.rule || fe.dataset.rule === f.rule)
              && (!f.severity || fe.dataset.severity === f.severity);
            show(fe, ok);
            if (ok) matched += 1;
          }
          const ok = convOk && (!byFinding || matched > 0) && (!f.tool || it.tool === f.tool)
            && (!q || text(it).includes(q));
          show(it.el, ok);
          if (ok) {
            anyItem = true;
            items += 1;
            calls += it.call ? 1 : 0;
            findings += matched;
          }
        }
        const stepOk = convOk && (anyItem || !narrowing);
        show(s.el, stepOk);
        anyStep = anyStep || stepOk;
      }
      show(c.el, convOk && (anyStep || !narrowing));
    }
    const filtered = KEYS.some((k) => f[k]);
    shown.textContent = filtered
      ? `showing ${items} of ${total} items: ${count(calls, "call or return", "calls and returns")}, ${count(findings, "finding", "findings")}`
      : `${total} items`;
    return performance.now() - started;
  }

  function count(n, one, many) {
    return `${n} ${n === 1 ? one : many}`;
  }

  function read() {
    const f = {};
    for (const k of KEYS) f[k] = form.elements[k].value;
    return f;
  }

  function write(f) {
    for (const k of KEYS) {
      const el = form.elements[k];
      const value = f[k] || "";
      if (el.tagName === "SELECT" && value && ![...el.options].some((o) => o.value === value)) {
        el.add(new Option(value, value));
      }
      el.value = value;
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
    if (f) { write(f); apply(f); }
  });
  window.convtapRefresh = () => { index(); apply(read()); };  // rows replaced: filter them again
  window.convtapFilter = (f) => {
    const all = Object.fromEntries(KEYS.map((k) => [k, (f && f[k]) || ""]));
    write(all);
    return apply(all);
  };

  index();
  const initial = fromHash();
  if (initial) write(initial);
  apply(initial || read());
  window.__convtapReadyAt = performance.now();
  window.__convtapReady = true;
})();
