// airlock reviewer pages: live updates of the pending page and the time
// left on each card. Nothing else. The page works without this script;
// the server decides everything.
'use strict';
(function () {
  // The only way HTML reaches the DOM here: the server's own rendering of
  // the cards (html/template, every agent-supplied string escaped).
  const policy = window.trustedTypes
    ? window.trustedTypes.createPolicy('airlock', { createHTML: function (s) { return s; } })
    : { createHTML: function (s) { return s; } };

  function fmt(ms) {
    let s = Math.floor(ms / 1000);
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    if (h > 0) return h + 'h ' + m + 'm';
    if (m > 0) return m + 'm ' + s + 's';
    return s + 's';
  }

  function disable(card, why) {
    card.querySelectorAll('button').forEach(function (b) { b.disabled = true; b.title = why; });
  }

  function tick() {
    const now = Date.now();
    document.querySelectorAll('article.card[data-expires]').forEach(function (card) {
      const left = Date.parse(card.dataset.expires) - now;
      const t = card.querySelector('time.left');
      if (left <= 0) {
        if (!card.classList.contains('expired')) {
          card.classList.add('expired');
          if (t) t.textContent = 'expired (a decision now is refused)';
          disable(card, 'This request has expired.');
        }
      } else if (t && !card.classList.contains('gone')) {
        t.textContent = fmt(left);
      }
    });
  }

  function setCount(n) {
    const c = document.getElementById('count');
    if (c) c.textContent = String(n);
    document.title = document.title.replace(/^\(\d+\)/, '(' + n + ')');
  }

  // merge keeps the cards a reviewer is reading (and what they typed), adds
  // new ones in order, and marks the ones no longer pending.
  function merge(fresh) {
    const cards = document.getElementById('cards');
    if (!cards) return;
    const ids = new Set();
    let prev = null;
    fresh.querySelectorAll('article.card').forEach(function (nc) {
      ids.add(nc.id);
      let cur = document.getElementById(nc.id);
      if (!cur) {
        cur = document.importNode(nc, true);
        cur.classList.add('new');
        if (prev) prev.after(cur); else cards.prepend(cur);
      }
      prev = cur;
    });
    cards.querySelectorAll('article.card').forEach(function (c) {
      if (!ids.has(c.id) && !c.classList.contains('gone')) {
        c.classList.add('gone');
        const t = c.querySelector('time.left');
        if (t) t.textContent = 'no longer pending (decided or expired)';
        disable(c, 'This request is no longer pending.');
      }
    });
    const empty = document.getElementById('empty');
    if (ids.size > 0 && empty) empty.remove();
    setCount(ids.size);
    cards.dataset.count = String(ids.size);
  }

  function poll(url, interval) {
    fetch(url, { credentials: 'same-origin', cache: 'no-store', redirect: 'error' })
      .then(function (res) {
        if (res.status === 401) {
          const e = document.getElementById('ended');
          if (e) e.classList.remove('hidden');
          return null;
        }
        if (!res.ok) throw new Error('status ' + res.status);
        return res.text();
      })
      .then(function (text) {
        if (text === null) return; // session ended: stop polling
        const doc = new DOMParser().parseFromString(policy.createHTML(text), 'text/html');
        const fresh = doc.getElementById('cards');
        if (fresh) merge(fresh);
        setTimeout(function () { poll(url, interval); }, interval);
      })
      .catch(function () { setTimeout(function () { poll(url, interval); }, interval * 2); });
  }

  function start() {
    tick();
    setInterval(tick, 1000);
    const live = document.getElementById('live');
    if (live && live.dataset.poll) {
      const interval = Math.max(500, parseInt(live.dataset.interval, 10) || 2000);
      setTimeout(function () { poll(live.dataset.poll, interval); }, interval);
    }
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
