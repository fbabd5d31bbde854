// The live page (`convtap serve`, `convtap record --web`): the server pushes, as server-sent
// events, the parts of the page that changed (the summary, a conversation) rendered by the
// report's own template; they replace their old selves, and the filters run again over them,
// so what the URL asks to see stays what is shown. Nothing but this page's own server is asked.
(() => {
  "use strict";
  const url = document.currentScript.dataset.events;
  const timeline = document.getElementById("timeline");
  const state = document.createElement("span");
  document.querySelector(".top p").append(" · ", state);

  // The key of each conversation, as the server names it: "conv:<digest of its id>" ("#n" after
  // a repeated id). Every other part is a section named by its id ("summary", "charts").
  function parts() {
    const found = new Map();
    const seen = new Map();
    for (const el of timeline.querySelectorAll(":scope > .conv")) {
      const id = el.dataset.key || "";
      const n = seen.get(id) || 0;
      seen.set(id, n + 1);
      found.set(n ? `conv:${id}#${n}` : `conv:${id}`, el);
    }
    return found;
  }

  function element(html) {
    const holder = document.createElement("template");
    holder.innerHTML = html;
    return holder.content.firstElementChild;
  }

  // What the reader unfolded stays unfolded (a part only grows: its earlier folds keep their place).
  function keepOpen(old, fresh) {
    const open = [...old.getElementsByTagName("details")].map((el) => el.open);
    [...fresh.getElementsByTagName("details")].forEach((el, n) => {
      if (n < open.length) el.open = open[n];
    });
  }

  function update(message) {
    const found = parts();
    for (const [key, html] of message.parts) {
      const fresh = element(html);
      const conversation = key.startsWith("conv:");
      const old = conversation ? found.get(key) : document.getElementById(key);
      if (old) {
        keepOpen(old, fresh);
        old.replaceWith(fresh);
      } else if (conversation) {
        timeline.append(fresh);
      }
      if (conversation) found.set(key, fresh);
    }
    if (message.order) {
      const wanted = new Set(message.order);
      for (const [key, el] of found) if (!wanted.has(key)) el.remove();
      for (const key of message.order) if (found.has(key)) timeline.append(found.get(key));
      const empty = timeline.querySelector(":scope > p.empty");
      if (empty) empty.hidden = message.order.length > 0;
    }
    const tools = document.getElementById("filters").elements.tool;
    for (const tool of message.tools) {
      if (![...tools.options].some((o) => o.value === tool)) tools.add(new Option(tool, tool));
    }
    window.convtapRefresh();
    state.textContent = `live: updated ${new Date().toISOString().slice(11, 23)}`;
    window.__convtapUpdates = (window.__convtapUpdates || 0) + 1;
  }

  state.textContent = "live: connecting";
  const events = new EventSource(url);
  events.addEventListener("update", (ev) => update(JSON.parse(ev.data)));
  events.addEventListener("open", () => { state.textContent = "live"; });
  events.addEventListener("error", () => { state.textContent = "live: reconnecting"; });
})();
