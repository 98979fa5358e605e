// The page of `drift serve` (docs/ui.md): an overview, the drift table and one drift, drawn from
// the JSON API only. Hash routes: #/ (overview), #/drifts?FILTERS (the table; the filters of
// GET /drifts, shareable), #/drifts/ID (one drift). Every value reaches the page as text
// (textContent, setAttribute), never as HTML. Tokens stay in sessionStorage.
'use strict';

(function () {
  const POLL_MS = 5000;
  const FILTERS = ['status', 'severity', 'drift_type', 'namespace', 'repository', 'cluster', 'kind', 'since'];
  const STATUSES = ['open', 'waived', 'resolved'];
  const SEVERITIES = ['CRITICAL', 'HIGH', 'MEDIUM', 'LOW'];
  const SVG = 'http://www.w3.org/2000/svg';

  // ---- small DOM helpers: values are always text ----
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  }
  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  }
  function setAttrs(node, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'text') node.textContent = String(v);
      else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? '' : String(v));
    }
  }
  function append(node, children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      node.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
    }
  }
  function replace(node, ...children) {
    node.replaceChildren();
    append(node, children);
  }
  const $ = (id) => document.getElementById(id);

  // ---- tokens ----
  const tokens = {
    get read() { return sessionStorage.getItem('drift.read') || ''; },
    get write() { return sessionStorage.getItem('drift.write') || ''; },
    set(read, write) {
      if (read) sessionStorage.setItem('drift.read', read); else sessionStorage.removeItem('drift.read');
      if (write) sessionStorage.setItem('drift.write', write); else sessionStorage.removeItem('drift.write');
    },
  };

  // ---- the API ----
  class ApiError extends Error {
    constructor(status, message, body) { super(message); this.status = status; this.body = body; }
  }
  async function api(path, options) {
    const opts = options || {};
    const headers = { Accept: 'application/json' };
    // A write token reads too; the read token never writes.
    const token = opts.write ? tokens.write : (tokens.read || tokens.write);
    if (token) headers.Authorization = 'Bearer ' + token;
    if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
    let response;
    try {
      response = await fetch(path, {
        method: opts.method || 'GET', headers, cache: 'no-store',
        body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      });
    } catch (e) {
      throw new ApiError(0, 'The API did not answer (' + e.message + '). Is drift serve running?');
    }
    let body = null;
    try { body = await response.json(); } catch (e) { body = null; }
    if (!response.ok) {
      const message = body && typeof body.error === 'string' ? body.error : 'HTTP ' + response.status;
      throw new ApiError(response.status, message, body);
    }
    return body;
  }
  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== '' && v !== null && v !== undefined) q.set(k, v);
    const s = q.toString();
    return s ? '?' + s : '';
  }

  // ---- formatting ----
  function when(t) {
    if (!t) return '—';
    const d = new Date(t);
    if (isNaN(d)) return String(t);
    return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z').replace(/Z$/, ' UTC');
  }
  function duration(seconds) {
    if (seconds === null || seconds === undefined) return '—';
    const s = Math.round(seconds);
    if (s < 60) return s + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return m + ' min ' + (s % 60) + ' s';
    const h = Math.floor(m / 60);
    if (h < 48) return h + ' h ' + (m % 60) + ' min';
    return Math.floor(h / 24) + ' d ' + (h % 24) + ' h';
  }
  function value(v) {
    if (v === null || v === undefined) return '(absent)';
    return JSON.stringify(v, null, 2);
  }
  function object(d) {
    const ns = d.namespace ? d.namespace + '/' : '';
    return d.resource_kind + ' ' + ns + d.resource_name;
  }
  const badge = (text, cls) => el('span', { class: 'badge ' + (cls || text), text });
  const sum = (counts) => Object.values(counts || {}).reduce((a, b) => a + b, 0);
  const driftLink = (params) => '#/drifts' + query(params);

  // ---- errors and the live line ----
  function showError(message) {
    const box = $('error');
    box.textContent = message;
    box.hidden = !message;
  }
  function explain(e) {
    if (e instanceof ApiError) {
      if (e.status === 401) {
        openTokens('The API answered 401: ' + e.message + '. Enter a token.');
        return 'This API needs a token: ' + e.message;
      }
      if (e.status === 501) return e.message;
      return (e.status ? 'The API answered ' + e.status + ': ' : '') + e.message;
    }
    return 'The page failed: ' + (e && e.message ? e.message : String(e));
  }
  window.addEventListener('error', (ev) => showError('The page failed: ' + ev.message));
  window.addEventListener('unhandledrejection', (ev) => showError(explain(ev.reason)));

  function setLive(text) { $('live').textContent = text; }

  // ---- the token panel ----
  function openTokens(reason) {
    const panel = $('token-panel');
    if (reason) $('token-reason').textContent = reason;
    // Open already: keep what is being typed.
    if (!panel.hidden) return;
    $('token-read').value = tokens.read;
    $('token-write').value = tokens.write;
    panel.hidden = false;
  }
  function setupTokens() {
    $('token-button').addEventListener('click', () => {
      const panel = $('token-panel');
      if (panel.hidden) openTokens(); else panel.hidden = true;
    });
    $('token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      tokens.set($('token-read').value.trim(), $('token-write').value.trim());
      $('token-panel').hidden = true;
      updateTokenButton();
      route(true);
    });
    $('token-forget').addEventListener('click', () => {
      tokens.set('', '');
      $('token-read').value = '';
      $('token-write').value = '';
      $('token-panel').hidden = true;
      updateTokenButton();
      route(true);
    });
    updateTokenButton();
  }
  function updateTokenButton() {
    $('token-button').textContent = tokens.write ? 'Token: write' : tokens.read ? 'Token: read' : 'Token';
  }

  // ---- routing and polling ----
  let current = null; // {key, refresh}
  function parseHash() {
    const h = location.hash.replace(/^#/, '') || '/';
    const [path, qs] = h.split('?');
    const params = new URLSearchParams(qs || '');
    const m = path.match(/^\/drifts\/(\d+)$/);
    if (m) return { view: 'drift', id: m[1], params };
    if (path === '/drifts') return { view: 'drifts', params };
    return { view: 'overview', params };
  }
  function route(force) {
    const r = parseHash();
    for (const a of document.querySelectorAll('[data-nav]')) {
      a.classList.toggle('active', a.dataset.nav === (r.view === 'drift' ? 'drifts' : r.view));
    }
    const key = r.view + ':' + (r.id || '');
    if (force || !current || current.key !== key) {
      const main = $('main');
      const view = VIEWS[r.view](main, r);
      current = { key, refresh: view.refresh };
    }
    refreshView();
  }
  let refreshing = false;
  async function refreshView() {
    if (!current || refreshing) return;
    refreshing = true;
    try {
      await current.refresh(parseHash());
      // The first view drawn with its data: what scripts/ui-bench.py measures.
      if (!performance.getEntriesByName('drift:rendered').length) performance.mark('drift:rendered');
      showError('');
      setLive('Updated ' + new Date().toLocaleTimeString());
    } catch (e) {
      showError(explain(e));
      setLive('Update failed ' + new Date().toLocaleTimeString());
    } finally {
      refreshing = false;
    }
  }
  function poll() {
    if (document.visibilityState !== 'visible') return;
    // Never redraw under someone typing into a form of the page.
    const a = document.activeElement;
    if (a && a.closest && a.closest('main form, #token-panel')) return;
    refreshView();
  }
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') refreshView(); else setLive('Paused while the tab is hidden');
  });

  // ---- the overview ----
  function overview(main) {
    const cards = {
      total: el('span', { class: 'value', id: 'stat-total', text: '…' }),
      open: el('span', { class: 'value', id: 'stat-open', text: '…' }),
      critical: el('span', { class: 'value', id: 'stat-critical', text: '…' }),
      high: el('span', { class: 'value', id: 'stat-high', text: '…' }),
    };
    const byRepo = el('ul', { class: 'bars', id: 'by-repository' });
    const byNs = el('ul', { class: 'bars', id: 'by-namespace' });
    const byType = el('ul', { class: 'bars', id: 'by-type' });
    const trend = el('div', { id: 'trend' });
    const resolve = el('dl', { class: 'facts', id: 'resolve' });
    const status = el('dl', { class: 'facts', id: 'by-status' });
    const ready = el('p', { id: 'ready' });
    const scans = el('div', { class: 'table-wrap', id: 'scans' });
    const gaps = el('div', { id: 'gaps' });
    const parked = el('div', { id: 'parked' });
    // The fleet overview, shown when drifts are open in more than one cluster.
    const fleetBox = el('div', { class: 'table-wrap', id: 'fleet-table' });
    const fleet = el('section', { class: 'panel', id: 'fleet', hidden: true },
      el('h2', { text: 'Fleet: open drifts by cluster, worst first' }), fleetBox);
    replace(main,
      el('h1', { text: 'Overview' }),
      el('div', { class: 'cards' },
        el('a', { class: 'card', href: driftLink({}) }, cards.total, el('span', { class: 'label', text: 'Total drifts' })),
        el('a', { class: 'card', href: driftLink({ status: 'open' }) }, cards.open, el('span', { class: 'label', text: 'Open' })),
        el('a', { class: 'card critical', href: driftLink({ status: 'open', severity: 'CRITICAL' }) }, cards.critical,
          el('span', { class: 'label', text: 'CRITICAL (open)' })),
        el('a', { class: 'card high', href: driftLink({ status: 'open', severity: 'HIGH' }) }, cards.high,
          el('span', { class: 'label', text: 'HIGH (open)' }))),
      fleet,
      el('div', { class: 'grid' },
        el('section', { class: 'panel' }, el('h2', { text: 'Open by repository' }), byRepo),
        el('section', { class: 'panel' }, el('h2', { text: 'Open by namespace' }), byNs),
        el('section', { class: 'panel' }, el('h2', { text: 'Open by type' }), byType)),
      el('div', { class: 'grid' },
        el('section', { class: 'panel' }, el('h2', { text: 'Last 7 days (UTC)' }), trend,
          el('div', { class: 'legend' },
            el('span', {}, el('span', { class: 'swatch new' }), 'new'),
            el('span', {}, el('span', { class: 'swatch resolved' }), 'resolved'))),
        el('section', { class: 'panel' }, el('h2', { text: 'Time to resolve' }), resolve),
        el('section', { class: 'panel' }, el('h2', { text: 'By status' }), status, ready)),
      el('section', { class: 'panel' }, el('h2', { text: 'Coverage gaps' }), gaps),
      el('section', { class: 'panel' }, el('h2', { text: 'Parked notifications' }), parked),
      el('section', { class: 'panel' }, el('h2', { text: 'Last scans' }), scans));

    async function refresh() {
      const [stats, scanList, readiness, parkedList] = await Promise.all([
        api('/stats'),
        api('/scans?limit=10'),
        fetch('/ready', { cache: 'no-store' }).then((r) => r.json()).catch(() => null),
        api('/notifications?status=parked&limit=50').catch((e) => e),
      ]);
      cards.total.textContent = sum(stats.by_status);
      cards.open.textContent = (stats.by_status || {}).open || 0;
      cards.critical.textContent = (stats.by_severity || {}).CRITICAL || 0;
      cards.high.textContent = (stats.by_severity || {}).HIGH || 0;
      bars(byRepo, stats.by_repository, 'repository');
      bars(byNs, stats.by_namespace, 'namespace');
      bars(byType, stats.by_type, 'drift_type');
      fleetTable(fleet, fleetBox, stats.by_cluster || []);
      replace(trend, trendChart(stats.trend || []));
      replace(resolve,
        el('dt', { text: 'Mean' }), el('dd', { id: 'mttr-mean', text: duration(stats.mean_time_to_resolve_seconds) }),
        el('dt', { text: '95th percentile' }), el('dd', { id: 'mttr-p95', text: duration(stats.p95_time_to_resolve_seconds) }),
        el('dt', { text: 'Resolved drifts' }), el('dd', { text: (stats.by_status || {}).resolved || 0 }));
      replace(status, STATUSES.map((s) => [
        el('dt', {}, el('a', { href: driftLink({ status: s }), text: s })),
        el('dd', { text: (stats.by_status || {})[s] || 0 })]));
      if (readiness) {
        replace(ready, readiness.status === 'ready'
          ? el('span', { class: 'ok', text: 'Ready: the store answers and the last scans are recent.' })
          : el('span', { class: 'bad', text: 'Not ready: ' + (readiness.error || 'unknown reason') }));
      }
      scanTable(scans, scanList.items || []);
      gapList(gaps, scanList.items || []);
      parkedTable(parked, parkedList);
    }
    return { refresh };
  }

  // Deliveries the notifier task gave up on, and why: an outage is probed and sent again by
  // itself once the receiver answers; a refusal waits for a requeue.
  function parkedTable(box, list) {
    if (list instanceof Error) {
      replace(box, el('p', { class: 'muted', text: 'Not available: ' + explain(list) }));
      return;
    }
    const items = list.items || [];
    if (!items.length) { replace(box, el('p', { class: 'ok', text: 'None: every notification was delivered or is on its way.' })); return; }
    const why = (p) => p.park_reason === 'outage'
      ? 'outage: retried until it answers'
      : p.park_reason === 'refused' ? 'refused: requeue it' : (p.park_reason || '');
    replace(box, el('div', { class: 'table-wrap' }, el('table', {},
      el('thead', {}, el('tr', {}, ['Notifier', 'Event', 'Drift', 'Why', 'Failing since', 'Attempts', 'Last error'].map((h) => el('th', { text: h })))),
      el('tbody', {}, items.map((p) => el('tr', { 'data-parked': p.event_id },
        el('td', { text: p.notifier }),
        el('td', {}, el('code', { text: p.kind + ' ' + p.event_id.slice(0, 12) })),
        el('td', {}, p.drift_id === null || p.drift_id === undefined ? '' : el('a', { href: '#/drifts/' + p.drift_id, text: '#' + p.drift_id })),
        el('td', { class: p.park_reason === 'refused' ? 'bad' : '', text: why(p) }),
        el('td', { text: p.failing_since ? when(p.failing_since) : '' }),
        el('td', { class: 'num', text: p.attempts }),
        el('td', { text: p.last_error || '' })))))));
  }

  // One row per cluster of /stats' by_cluster (worst first): its open drifts by severity and
  // its three namespaces with the most, each a link to those drifts.
  function fleetTable(section, box, clusters) {
    section.hidden = clusters.length < 2;
    if (section.hidden) { replace(box); return; }
    replace(box, el('table', {},
      el('thead', {}, el('tr', {}, ['Cluster', 'Open', ...SEVERITIES, 'Namespaces with the most'].map((h) => el('th', { text: h })))),
      el('tbody', {}, clusters.map((c) => {
        const top = Object.entries(c.by_namespace || {}).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, 3);
        return el('tr', { 'data-cluster': c.cluster },
          el('td', {}, el('a', { href: driftLink({ status: 'open', cluster: c.cluster }), text: c.cluster })),
          el('td', { class: 'num', text: c.open }),
          SEVERITIES.map((s) => el('td', { class: 'num', text: (c.by_severity || {})[s] || 0 })),
          el('td', {}, top.map(([ns, n], i) => [i ? ', ' : '',
            el('a', { href: driftLink({ status: 'open', cluster: c.cluster, namespace: ns }), text: (ns || '(cluster-scoped)') + ' ' + n })])));
      }))));
  }

  function bars(list, counts, filter) {
    const entries = Object.entries(counts || {}).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    if (!entries.length) { replace(list, el('li', { class: 'muted', text: 'No open drifts.' })); return; }
    const max = Math.max(...entries.map((e) => e[1]));
    replace(list, entries.map(([name, n]) => {
      const fill = el('div', { class: 'fill' });
      fill.style.width = (100 * n / max).toFixed(1) + '%';
      const params = { status: 'open' };
      params[filter] = name;
      return el('li', { 'data-name': name },
        el('a', { class: 'name', href: driftLink(params), title: name || '(cluster-scoped)', text: name || '(cluster-scoped)' }),
        el('div', { class: 'track' }, fill),
        el('span', { class: 'count', text: n }));
    }));
  }

  function trendChart(days) {
    const W = 420, H = 180, top = 16, bottom = 28, left = 28;
    const max = Math.max(1, ...days.map((d) => Math.max(d.new, d.resolved)));
    const step = (W - left) / Math.max(days.length, 1);
    const bw = Math.max(4, step / 2 - 4);
    const y = (n) => top + (H - top - bottom) * (1 - n / max);
    const chart = svg('svg', { class: 'chart', viewBox: '0 0 ' + W + ' ' + H, role: 'img',
      'aria-label': 'Drifts new and resolved per day over the last 7 days' });
    append(chart, [
      svg('line', { class: 'axis', x1: left, x2: W, y1: H - bottom, y2: H - bottom }),
      svg('text', { x: 0, y: top + 4, text: max }),
      svg('text', { x: 0, y: H - bottom, text: 0 }),
    ]);
    days.forEach((d, i) => {
      const x = left + i * step + 2;
      for (const [k, dx] of [['new', 0], ['resolved', bw + 2]]) {
        const h = H - bottom - y(d[k]);
        const rect = svg('rect', { class: k, x: x + dx, y: y(d[k]), width: bw, height: Math.max(h, 0) });
        append(rect, [svg('title', { text: d.day + ': ' + d[k] + ' ' + k })]);
        chart.appendChild(rect);
        if (d[k] > 0) chart.appendChild(svg('text', { x: x + dx, y: y(d[k]) - 3, text: d[k] }));
      }
      chart.appendChild(svg('text', { x: x, y: H - 10, text: String(d.day).slice(5) }));
    });
    return chart;
  }

  function scanTable(box, scans) {
    if (!scans.length) { replace(box, el('p', { class: 'muted', text: 'No scan has been recorded yet.' })); return; }
    replace(box, el('table', {},
      el('thead', {}, el('tr', {}, ['Finished', 'Cluster', 'Repository', 'Revision', 'Outcome', 'Drifts', 'Warnings', 'Gaps']
        .map((h, i) => el('th', { class: i === 3 ? 'hide-narrow' : null, text: h })))),
      el('tbody', {}, scans.map((s) => el('tr', { 'data-scan': s.scan_id },
        el('td', { text: when(s.finished_at) }),
        el('td', { text: s.cluster }),
        el('td', { text: s.repository }),
        el('td', { class: 'hide-narrow' }, el('code', { text: (s.revision || '—').slice(0, 12) })),
        el('td', { class: s.outcome === 'failed' ? 'bad' : s.outcome === 'partial' ? '' : 'ok', text: s.outcome }),
        el('td', { class: 'num', text: s.drifts }),
        el('td', { class: 'num', text: s.warnings }),
        el('td', { class: 'num', text: (s.coverage_gaps || []).length }))))));
  }

  function gapList(box, scans) {
    // The last scan of each (cluster, repository): newest first, the first one seen.
    const last = new Map();
    for (const s of scans) {
      const k = s.cluster + '\u0000' + s.repository;
      if (!last.has(k)) last.set(k, s);
    }
    const rows = [];
    for (const s of last.values()) {
      for (const g of s.coverage_gaps || []) rows.push([s, g]);
    }
    if (!last.size) { replace(box, el('p', { class: 'muted', text: 'No scan has been recorded yet.' })); return; }
    if (!rows.length) {
      replace(box, el('p', { class: 'ok', text: 'None: the last scan of every repository read every kind and namespace in scope.' }));
      return;
    }
    replace(box,
      el('p', { class: 'muted', text: 'Drifts here were neither found nor resolved by the last scans.' }),
      el('div', { class: 'table-wrap' }, el('table', {},
        el('thead', {}, el('tr', {}, ['Cluster', 'Repository', 'Kind', 'Namespace', 'Status', 'Why'].map((h) => el('th', { text: h })))),
        el('tbody', {}, rows.map(([s, g]) => el('tr', {},
          el('td', { text: s.cluster }), el('td', { text: s.repository }),
          el('td', { text: (g.group ? g.group + '/' : '') + g.kind }),
          el('td', { text: g.namespace === null || g.namespace === undefined ? '(cluster-scoped)' : g.namespace }),
          el('td', { class: 'bad', text: g.status }),
          el('td', { text: g.message || '' })))))));
  }

  // ---- the drift table ----
  let enums = null; // from the OpenAPI document: the values of the select filters
  async function loadEnums() {
    if (enums) return enums;
    const doc = await api('/openapi.json');
    const params = ((doc.paths['/drifts'] || {}).get || {}).parameters || [];
    const values = (name) => ((params.find((p) => p.name === name) || {}).schema || {}).enum;
    enums = { status: values('status') || STATUSES, severity: values('severity') || SEVERITIES, drift_type: values('drift_type') || [] };
    return enums;
  }

  function drifts(main, r) {
    const form = el('form', { class: 'filters', id: 'filters' });
    const fields = {};
    const select = (name, label, options) => {
      const s = el('select', { id: 'filter-' + name, name }, el('option', { value: '', text: 'any' }),
        options.map((o) => el('option', { value: o, text: o })));
      fields[name] = s;
      return el('label', {}, label, s);
    };
    const text = (name, label, placeholder) => {
      const i = el('input', { id: 'filter-' + name, name, type: 'text', placeholder, spellcheck: 'false' });
      fields[name] = i;
      return el('label', {}, label, i);
    };
    const limit = el('select', { id: 'filter-limit', name: 'limit' }, ['25', '50', '100'].map((n) => el('option', { value: n, text: n })));
    fields.limit = limit;
    append(form, [
      select('status', 'Status', STATUSES),
      select('severity', 'Severity', SEVERITIES),
      select('drift_type', 'Type', []),
      text('namespace', 'Namespace', 'shop'),
      text('repository', 'Repository', 'platform'),
      text('cluster', 'Cluster', 'prod'),
      text('kind', 'Kind', 'Deployment'),
      text('since', 'Seen since', '2026-11-30T00:00:00Z'),
      el('label', {}, 'Per page', limit),
      el('div', { class: 'row' },
        el('button', { id: 'filter-apply', type: 'submit', text: 'Filter' }),
        el('a', { href: '#/drifts', id: 'filter-clear', text: 'Clear' })),
    ]);
    const summary = el('p', { class: 'muted', id: 'drift-summary' });
    const table = el('div', { class: 'table-wrap', id: 'drift-table' });
    const pager = el('div', { class: 'pager', id: 'pager' });
    replace(main, el('h1', { text: 'Drifts' }), el('section', { class: 'panel' }, form), summary, table, pager);

    loadEnums().then((e) => {
      const s = fields.drift_type;
      const chosen = s.value || parseHash().params.get('drift_type') || '';
      replace(s, el('option', { value: '', text: 'any' }), e.drift_type.map((o) => el('option', { value: o, text: o })));
      s.value = chosen;
    }).catch((e) => showError(explain(e)));

    function fill(params) {
      for (const name of FILTERS) fields[name].value = params.get(name) || '';
      const limit = params.get('limit') || '50';
      // A page size from a shared link that the list does not offer is added to it.
      if (![...fields.limit.options].some((o) => o.value === limit)) {
        fields.limit.appendChild(el('option', { value: limit, text: limit }));
      }
      fields.limit.value = limit;
    }
    fill(r.params);
    const submit = (ev) => {
      if (ev) ev.preventDefault();
      const params = {};
      for (const name of FILTERS) params[name] = fields[name].value.trim();
      if (fields.limit.value !== '50') params.limit = fields.limit.value;
      const target = driftLink(params);
      if (location.hash === target) refreshView(); else location.hash = target;
    };
    form.addEventListener('submit', submit);
    for (const name of ['status', 'severity', 'drift_type']) fields[name].addEventListener('change', submit);
    fields.limit.addEventListener('change', submit);

    let shown = '';
    async function refreshTable(route) {
      const params = route.params;
      if (params.toString() !== shown) fill(params);
      shown = params.toString();
      const filters = {};
      for (const name of FILTERS) if (params.get(name)) filters[name] = params.get(name);
      const page = Object.assign({}, filters, { limit: params.get('limit') || '50', after: params.get('after') || '' });
      const [list, stats] = await Promise.all([api('/drifts' + query(page)), api('/stats' + query(filters))]);
      const items = list.items || [];
      summary.textContent = items.length + ' shown of ' + sum(stats.by_status) + ' matching' +
        (params.get('after') ? ' (a later page)' : '') + '.';
      if (!items.length) {
        replace(table, el('p', { class: 'muted', text: 'No drift matches these filters.' }));
      } else {
        replace(table, el('table', {},
          el('thead', {}, el('tr', {}, [['#'], ['Severity'], ['Status'], ['Object'], ['Path'], ['Type', 'hide-narrow'],
            ['Repository', 'hide-narrow'], ['Cluster', 'hide-narrow'], ['Last seen', 'hide-narrow'], ['Seen', 'hide-narrow']]
            .map(([h, c]) => el('th', { class: c, text: h })))),
          el('tbody', {}, items.map((d) => el('tr', { 'data-id': d.id },
            el('td', {}, el('a', { href: '#/drifts/' + d.id, text: '#' + d.id })),
            el('td', {}, badge(d.severity)),
            el('td', {}, badge(d.status)),
            el('td', {}, el('a', { href: '#/drifts/' + d.id, text: object(d) })),
            el('td', {}, el('code', { text: d.path })),
            el('td', { class: 'hide-narrow', text: d.drift_type }),
            el('td', { class: 'hide-narrow', text: d.repository }),
            el('td', { class: 'hide-narrow', text: d.cluster }),
            el('td', { class: 'hide-narrow when', text: when(d.last_seen) }),
            el('td', { class: 'num hide-narrow', text: d.occurrences }))))));
      }
      const links = [];
      if (params.get('after')) {
        const first = Object.assign({}, filters);
        if (params.get('limit')) first.limit = params.get('limit');
        links.push(el('a', { href: driftLink(first), id: 'page-first', text: '« First page' }));
      }
      if (list.next) {
        const next = Object.assign({}, filters, { after: list.next });
        if (params.get('limit')) next.limit = params.get('limit');
        links.push(el('a', { href: driftLink(next), id: 'page-next', text: 'Next page »' }));
      }
      replace(pager, links);
      // What the table shows, for whoever waits for it (the tests).
      table.dataset.query = params.toString();
    }
    return { refresh: refreshTable };
  }

  // ---- one drift ----
  function drift(main, r) {
    const id = r.id;
    const head = el('div', { id: 'drift-head' }, el('h1', { text: 'Drift #' + id }));
    const gitValue = el('pre', { id: 'git-value' });
    const clusterValue = el('pre', { id: 'cluster-value' });
    const facts = el('dl', { class: 'facts', id: 'drift-facts' });
    const learned = el('p', { id: 'learned', class: 'muted' });
    const predicted = el('div', { id: 'prediction' });
    const revertBox = el('div', { id: 'revert' });
    const decisions = el('div', { class: 'table-wrap', id: 'decisions' });
    const notifications = el('div', { class: 'table-wrap', id: 'notifications' });
    const history = el('div', { class: 'table-wrap', id: 'history' });
    const actions = actionPanel(id, () => refreshView());
    replace(main,
      el('p', {}, el('a', { href: '#/drifts', text: '« All drifts' })),
      head,
      el('div', { class: 'grid2' },
        el('section', { class: 'panel' }, el('h2', { text: 'Git says' }), gitValue),
        el('section', { class: 'panel' }, el('h2', { text: 'The cluster has' }), clusterValue)),
      actions.node,
      el('div', { class: 'grid2' },
        el('section', { class: 'panel' }, el('h2', { text: 'What, who and when' }), facts, learned, predicted),
        el('section', { class: 'panel' }, el('h2', { text: 'Revert by hand' }), revertBox)),
      el('section', { class: 'panel' }, el('h2', { text: 'Decisions' }), decisions),
      el('section', { class: 'panel' }, el('h2', { text: 'History' }), history),
      el('section', { class: 'panel' }, el('h2', { text: 'Notifications' }), notifications));

    async function refresh() {
      const [d, audit] = await Promise.all([
        api('/drifts/' + id),
        api('/audit?limit=50&drift_id=' + id).catch((e) => e),
      ]);
      replace(head,
        el('h1', { text: '#' + d.id + ' ' + object(d) }),
        el('p', { class: 'row' }, badge(d.severity), badge(d.status), el('code', { text: d.path }),
          el('span', { class: 'muted', text: d.drift_type })));
      gitValue.textContent = value(d.git_value);
      clusterValue.textContent = value(d.cluster_value);
      const fact = (k, v) => [el('dt', { text: k }), el('dd', { text: v === null || v === undefined || v === '' ? '—' : v })];
      replace(facts,
        fact('Changed by', d.changed_by), fact('Changed at', when(d.changed_at)),
        // The person behind the change, from the Kubernetes audit log (docs/kubernetes.md).
        d.changed_by_user ? fact('Changed by user', d.changed_by_user.username
          + (d.changed_by_user.groups.length ? ' (' + d.changed_by_user.groups.join(', ') + ')' : '')
          + (d.changed_by_user.source_ips.length ? ' from ' + d.changed_by_user.source_ips.join(', ') : '')
          + (d.changed_by_user.user_agent ? ' with ' + d.changed_by_user.user_agent : '')) : null,
        fact('Classification', d.classification), fact('Recommended', d.recommended_action),
        fact('Decided by', d.decision_source),
        fact('First seen', when(d.detected_at)), fact('Last seen', when(d.last_seen)),
        fact('Occurrences', d.occurrences),
        fact('Cluster', d.cluster), fact('Repository', d.repository),
        fact('API group', d.api_group || '(core)'),
        d.waived_until ? fact('Waived until', when(d.waived_until) + ' by ' + (d.waived_by || '?')) : null,
        d.acknowledged_at ? fact('Acknowledged', when(d.acknowledged_at)) : null,
        d.resolved_at ? fact('Resolved', when(d.resolved_at) + (d.resolution ? ' (' + d.resolution + ')' : '')) : null,
        fact('Fingerprint', d.fingerprint));
      learned.textContent = d.learned ? 'Similar decisions: ' + d.learned.explanation : '';
      // The classifier's prediction (docs/decisions.md), its reasons, and whether it is acted on.
      const p = d.prediction;
      replace(predicted, p ? [
        el('p', { id: 'prediction-head' },
          el('strong', { text: 'Predicted: ' + p.intent + ' (' + Math.round(p.confidence * 100) + '%)' }),
          el('span', { class: 'muted', text: ' learned from ' + p.examples + ' decided drift(s); ' + (p.used
            ? 'acted on (at or above ' + Math.round(p.min_confidence * 100) + '%)'
            : p.min_confidence === null ? 'shown only (no classify: settings)'
              : 'shown only (below ' + Math.round(p.min_confidence * 100) + '%, or too few decisions)') })),
        p.reasons.length ? el('ul', { id: 'prediction-reasons', class: 'muted' }, p.reasons.map((x) => el('li', { text: x.text }))) : null,
      ] : el('p', { class: 'muted', text: 'Predicted: nothing yet (no decided drift to learn from)' }));
      if (d.revert) {
        replace(revertBox,
          el('p', { class: 'muted', text: 'The JSON patch (RFC 6902) that puts Git\u2019s value back, each change after a test of the value it replaces:' }),
          el('pre', { id: 'revert-patch', text: JSON.stringify(d.revert.patch, null, 2) }),
          el('p', { class: 'muted', text: 'The kubectl command that sends it:' }),
          el('pre', { id: 'revert-command', text: d.revert.command }));
      } else {
        replace(revertBox, el('p', { class: 'muted', text: 'No patch: a missing object is restored by a sync, and a Secret\u2019s value is never shown.' }));
      }
      const decided = d.decisions || [];
      replace(decisions, decided.length ? el('table', {},
        el('thead', {}, el('tr', {}, ['When', 'Action', 'Who', 'Comment', 'Expires'].map((h) => el('th', { text: h })))),
        el('tbody', {}, decided.map((x) => el('tr', { 'data-decision': x.id },
          el('td', { text: when(x.decided_at) }), el('td', { text: x.action }), el('td', { text: x.actor }),
          el('td', { text: x.comment || '' }), el('td', { text: x.expires_at ? when(x.expires_at) : '' })))))
        : el('p', { class: 'muted', text: 'No decision yet.' }));
      const sent = d.notifications || [];
      replace(notifications, sent.length ? el('table', {},
        el('thead', {}, el('tr', {}, ['Event', 'Notifier', 'Status', 'Attempts', 'Sent', 'Last error'].map((h) => el('th', { text: h })))),
        el('tbody', {}, sent.map((n) => el('tr', {},
          el('td', { text: n.kind }), el('td', { text: n.notifier }), el('td', { text: n.status }),
          el('td', { class: 'num', text: n.attempts }), el('td', { text: when(n.sent_at) }),
          el('td', { text: n.last_error || '' })))))
        : el('p', { class: 'muted', text: 'No notification about this drift.' }));
      if (audit instanceof Error) {
        replace(history, el('p', { class: 'muted', text: 'No history: ' + explain(audit) }));
      } else {
        const entries = audit.items || [];
        replace(history, entries.length ? el('table', {},
          el('thead', {}, el('tr', {}, ['When', 'What', 'Who', 'Status'].map((h) => el('th', { text: h })))),
          el('tbody', {}, entries.map((a) => el('tr', {},
            el('td', { text: when(a.at) }), el('td', { text: a.action }), el('td', { text: a.actor || '' }),
            el('td', { text: a.status || '' })))))
          : el('p', { class: 'muted', text: 'Nothing recorded about this drift yet.' }));
      }
      actions.update(d);
    }
    return { refresh };
  }

  // The buttons of one drift: shown only with a write token.
  function actionPanel(id, after) {
    const result = el('div', { class: 'result', id: 'action-result', role: 'status' });
    const show = (ok, text, detail) => replace(result,
      el('p', { class: ok ? 'ok' : 'bad', text }), detail ? el('pre', { text: detail }) : null);
    const fail = (e) => show(false, explain(e), e && e.body && e.body.refusal ? 'refusal: ' + e.body.refusal : null);

    const action = el('select', { id: 'decide-action', name: 'action' },
      ['acknowledge', 'accept', 'reject'].map((a) => el('option', { value: a, text: a })));
    const comment = el('textarea', { id: 'decide-comment', name: 'comment', maxlength: 2000,
      placeholder: 'Why (required to accept)' });
    const expires = el('input', { id: 'decide-expires', name: 'expires_at', type: 'text',
      placeholder: 'Waiver ends (RFC 3339, e.g. 2026-12-31T00:00:00Z; default 7 days)', spellcheck: 'false' });
    const expiresLabel = el('label', {}, 'Waiver ends', expires);
    const syncExpiry = () => { expiresLabel.hidden = action.value !== 'accept'; };
    action.addEventListener('change', syncExpiry);
    syncExpiry();
    const decideButton = el('button', { id: 'decide-submit', type: 'submit', text: 'Record decision' });
    const decide = el('form', { id: 'decide-form' }, el('label', {}, 'Decision', action),
      el('label', {}, 'Comment', comment), expiresLabel, el('div', { class: 'row' }, decideButton));
    decide.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const body = { action: action.value };
      if (comment.value.trim()) body.comment = comment.value.trim();
      if (action.value === 'accept' && expires.value.trim()) body.expires_at = expires.value.trim();
      decideButton.disabled = true;
      try {
        const x = await api('/drifts/' + id + '/decisions', { method: 'POST', body, write: true });
        show(true, 'Recorded: ' + x.action + ' by ' + x.actor + '.');
        comment.value = '';
        decideButton.blur();
        after();
      } catch (e) { fail(e); } finally { decideButton.disabled = false; }
    });

    const dryRun = el('button', { id: 'revert-dry-run', type: 'button', class: 'secondary', text: 'Revert: dry run' });
    const revertNow = el('button', { id: 'revert-now', type: 'button', class: 'danger', text: 'Revert now', disabled: true });
    dryRun.addEventListener('click', async () => {
      revertNow.disabled = true;
      try {
        const x = await api('/drifts/' + id + '/revert?dry_run=true', { method: 'POST', write: true });
        show(true, 'Dry run: the cluster accepts the change of ' + (x.paths || []).join(', ') + ' on ' + x.object + '.',
          x.plan ? JSON.stringify(x.plan, null, 2) : null);
        revertNow.disabled = false;
      } catch (e) { fail(e); }
    });
    revertNow.addEventListener('click', async () => {
      revertNow.disabled = true;
      try {
        const x = await api('/drifts/' + id + '/revert', { method: 'POST', write: true });
        show(true, 'Reverted ' + x.object + ' (' + (x.paths || []).join(', ') + '); the next scan resolves the drift.');
        after();
      } catch (e) { fail(e); }
    });
    const acceptGit = el('button', { id: 'accept-git', type: 'button', class: 'secondary', text: 'Accept into Git: propose a pull request' });
    acceptGit.addEventListener('click', async () => {
      acceptGit.disabled = true;
      try {
        const x = await api('/drifts/' + id + '/accept', { method: 'POST', write: true });
        const p = x.proposal || {};
        replace(result, el('p', { class: 'ok' }, 'Proposed on branch ', el('code', { text: p.branch || '?' }),
          p.url ? [' — ', el('a', { href: p.url, rel: 'noopener noreferrer', target: '_blank', text: p.url })] : null),
        (p.unplaced || []).length ? el('pre', { text: 'Not placed:\n' + p.unplaced.join('\n') }) : null);
      } catch (e) { fail(e); } finally { acceptGit.disabled = false; }
    });

    const withToken = el('div', { id: 'actions-enabled' },
      el('div', { class: 'grid2' },
        el('div', {}, el('h2', { text: 'Decide' }), decide),
        el('div', {}, el('h2', { text: 'Remediate' }),
          el('p', { class: 'muted', text: 'A revert sends a server-side apply of the drifted field; the dry run comes first.' }),
          el('div', { class: 'row' }, dryRun, revertNow),
          el('div', { class: 'row' }, acceptGit))),
      result);
    const without = el('p', { class: 'muted', id: 'actions-disabled' },
      'To decide, revert or accept into Git, enter a write token (the Token button).');
    const node = el('section', { class: 'panel actions', id: 'actions' }, without, withToken);
    function update(d) {
      const can = !!tokens.write;
      withToken.hidden = !can;
      without.hidden = can;
      const closed = d.status === 'resolved';
      decideButton.disabled = closed;
      dryRun.disabled = closed;
      acceptGit.disabled = closed;
      if (closed) revertNow.disabled = true;
    }
    update({ status: 'open' });
    return { node, update };
  }

  const VIEWS = { overview, drifts, drift };

  function start() {
    setupTokens();
    window.addEventListener('hashchange', () => route(false));
    route(true);
    setInterval(poll, POLL_MS);
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start); else start();
})();
