// The live page (`convtap serve`, `convtap record --web`): the page fetches the capture's data
// from its server's latest reading (data.js); once the server has said which reading that is,
// it pushes, as server-sent events, what changed since: the steps read again (each with the
// reading it is of, `v`: a step is only ever replaced by a later one, whichever comes first),
// the steps gone, and the summary and the pictures when they differ from those the page shows
// (named by their tag). The filters stay as they are and run again over the new data, so what
// the URL asks to see stays what is shown. Nothing but this page's own server is asked.
(() => {
  "use strict";
  const script = document.currentScript;
  const state = document.createElement("span");
  document.querySelector(".top p").append(" · ", state);

  function element(html) {
    const holder = document.createElement("template");
    holder.innerHTML = html;  // the server's own rendering of its template, escaped there
    return holder.content.firstElementChild;
  }

  function update(message) {
    window.convtap.add(message.steps);
    window.convtap.remove(message.gone.map((key) => [JSON.stringify(key), message.v]));
    for (const [id, html] of message.parts) {
      const old = document.getElementById(id);
      if (old) old.replaceWith(element(html));
    }
    window.convtap.refresh(message.steps);
    state.textContent = `live: updated ${new Date().toISOString().slice(11, 23)}`;
    window.__convtapUpdates = (window.__convtapUpdates || 0) + 1;
    window.__convtapSent = (window.__convtapSent || 0) + message.steps.length;
  }

  state.textContent = "live: connecting";
  window.convtapReading.then((reading) => {
    const query = new URLSearchParams({ v: reading, p: script.dataset.parts });
    const events = new EventSource(`${script.dataset.events}?${query}`);
    events.addEventListener("update", (ev) => update(JSON.parse(ev.data)));
    events.addEventListener("reload", () => { events.close(); location.reload(); });
    events.addEventListener("open", () => { state.textContent = "live"; });
    events.addEventListener("error", () => { state.textContent = "live: reconnecting"; });
  });
})();
