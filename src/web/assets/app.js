// The explorer page: plain DOM, no framework, no build step. It asks the JSON API under the same path
// (`api/...`), which fetches the Source through resourcesync's own client. Everything from a Source is
// untrusted: it is put into the page with textContent only, and links are made only for http(s) URLs.
// Lists are paged (100 entries at a time); nothing asks for a whole list.

const PAGE = 100;
/** Summaries (whole-document reads) run at most this many at once. */
const SUMMARY_CONCURRENCY = 2;
/** Children shown under a tree node (the rest: open the document). */
const MAX_CHILDREN = 200;
/** Documents visited by "Check every document". */
const MAX_CHECKED = 500;

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== undefined && c !== null) e.append(c);
  return e;
}

function isHttp(url) {
  return typeof url === 'string' && /^https?:\/\//i.test(url);
}

/** A link for an http(s) URL, plain text otherwise. */
function urlNode(url) {
  return isHttp(url)
    ? el('a', { href: url, rel: 'noopener noreferrer', target: '_blank', text: url })
    : document.createTextNode(url);
}

function status(message, isError = false) {
  const s = $('status');
  s.textContent = message;
  s.classList.toggle('error', isError);
}

async function api(name, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params))
    if (v !== undefined && v !== null) q.set(k, typeof v === 'string' ? v : JSON.stringify(v));
  const res = await fetch(`api/${name}?${q}`, { headers: { accept: 'application/json' } });
  let body;
  try {
    body = await res.json();
  } catch {
    throw new Error(`${name}: HTTP ${res.status}`);
  }
  if (!res.ok) throw new Error(body?.error?.message ?? `${name}: HTTP ${res.status}`);
  return body;
}

function formatBytes(n) {
  if (typeof n !== 'number') return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

const KIND_NAMES = {
  'source-description': 'Source Description',
  'source-description-index': 'Source Description Index',
  'capability-list': 'Capability List',
  'resource-list': 'Resource List',
  'resource-list-index': 'Resource List Index',
  'resource-dump': 'Resource Dump',
  'resource-dump-index': 'Resource Dump Index',
  'resource-dump-manifest': 'Resource Dump Manifest',
  'change-list': 'Change List',
  'change-list-index': 'Change List Index',
  'change-dump': 'Change Dump',
  'change-dump-index': 'Change Dump Index',
  'change-dump-manifest': 'Change Dump Manifest',
};
const CAPABILITY_NAMES = {
  description: 'Source Description',
  capabilitylist: 'Capability List',
  resourcelist: 'Resource List',
  resourcedump: 'Resource Dump',
  changelist: 'Change List',
  changedump: 'Change Dump',
  'resourcedump-manifest': 'Manifest',
  'changedump-manifest': 'Manifest',
};

function kindName(kind) {
  return KIND_NAMES[kind] ?? kind;
}

function where(issue) {
  const parts = [];
  if (issue.entry !== undefined) parts.push(`entry ${issue.entry}`);
  if (issue.line !== undefined) parts.push(`line ${issue.line}`);
  if (issue.element !== undefined) parts.push(`<${issue.element}>`);
  if (issue.attribute !== undefined) parts.push(`@${issue.attribute}`);
  return parts.join(', ');
}

// ---------------------------------------------------------------------------------------------------------
// Summaries: a small queue, so that a tree of many documents does not read them all at once.

const summaries = new Map();
const summaryQueue = [];
let summariesRunning = 0;

function summaryOf(url, context) {
  let entry = summaries.get(url);
  if (entry === undefined) {
    let resolve;
    let reject;
    const promise = new Promise((res, rej) => {
      resolve = res;
      reject = rej;
    });
    entry = { promise, start: () => api('summary', { url, context }).then(resolve, reject) };
    summaries.set(url, entry);
    summaryQueue.push(entry);
    pumpSummaries();
    promise.then((s) => recordIssues(url, s)).catch(() => {});
  }
  return entry.promise;
}

function pumpSummaries() {
  while (summariesRunning < SUMMARY_CONCURRENCY && summaryQueue.length > 0) {
    const next = summaryQueue.shift();
    summariesRunning++;
    next
      .start()
      .catch(() => {})
      .finally(() => {
        summariesRunning--;
        pumpSummaries();
      });
  }
}

// ---------------------------------------------------------------------------------------------------------
// Issues of every document checked so far.

const issuesByDoc = new Map();

function recordIssues(url, summary) {
  issuesByDoc.set(url, summary);
  const body = $('issues-table').tBodies[0];
  let errors = 0;
  let warnings = 0;
  body.textContent = '';
  for (const [doc, s] of issuesByDoc) {
    errors += s.errors;
    warnings += s.warnings;
    for (const i of s.issues) {
      body.append(
        el(
          'tr',
          { class: i.severity },
          el(
            'td',
            { class: 'uri' },
            el('button', { class: 'doc-link', type: 'button', text: doc, onclick: () => openDocument(doc) }),
          ),
          el('td', { class: i.severity, text: i.severity }),
          el('td', { text: i.code }),
          el('td', { text: i.section }),
          el('td', { text: where(i) }),
          el('td', { text: i.message }),
        ),
      );
    }
  }
  $('issues-table').hidden = body.rows.length === 0;
  $('issues-info').textContent = `${issuesByDoc.size} document(s) checked: ${errors} error(s), ${warnings} warning(s).`;
}

// ---------------------------------------------------------------------------------------------------------
// The tree of documents.

/** Tree nodes by URL (a document listed twice is shown twice, but read once). */
let current = { url: undefined, offset: 0, context: undefined, header: undefined };

function metaText(header, label = '') {
  if (header === undefined) return '';
  const md = header.md ?? {};
  const kind = kindName(header.kind);
  const parts = label.startsWith(kind) ? [] : [kind];
  for (const k of ['at', 'completed', 'from', 'until']) if (md[k] !== undefined) parts.push(`${k} ${md[k]}`);
  return parts.join(' · ');
}

function summaryBadge(s) {
  const parts = [`${s.entries} entries`];
  if (typeof s.bytes === 'number') parts.push(formatBytes(s.bytes));
  const text = parts.join(', ');
  const cls = s.errors > 0 ? 'error' : s.warnings > 0 ? 'warning' : 'ok';
  const label = s.errors > 0 ? `${s.errors} error(s)` : s.warnings > 0 ? `${s.warnings} warning(s)` : 'valid';
  return [el('span', { class: 'meta', text }), el('span', { class: `badge ${cls}`, text: label })];
}

/**
 * A tree node for a document. `label` names it; `context` is how its parent listed it (for the rules between
 * documents). Its children are read when it is expanded.
 */
function treeNode(url, label, context, depth) {
  const children = el('ul', { hidden: true });
  const meta = el('span', { class: 'meta' });
  const badges = el('span');
  const twisty = el('button', {
    class: 'twisty',
    type: 'button',
    'aria-expanded': 'false',
    'aria-label': `Show the documents under ${label}`,
    text: '+',
  });
  const link = el('button', {
    class: 'doc-link',
    type: 'button',
    'data-url': url,
    text: label,
    onclick: () => openDocument(url, context),
  });
  const li = el('li', { 'data-url': url }, el('div', { class: 'row' }, twisty, link, meta, badges), children);
  let loaded = false;
  const node = {
    li,
    url,
    context,
    expanded: false,
    async expand() {
      if (!loaded) {
        loaded = true;
        await loadChildren();
      }
      node.expanded = true;
      children.hidden = false;
      twisty.setAttribute('aria-expanded', 'true');
      twisty.textContent = '−';
    },
    collapse() {
      node.expanded = false;
      children.hidden = true;
      twisty.setAttribute('aria-expanded', 'false');
      twisty.textContent = '+';
    },
    childNodes: [],
  };
  twisty.addEventListener('click', () => {
    if (node.expanded) node.collapse();
    else node.expand().catch((e) => status(e.message, true));
  });
  async function loadChildren() {
    const page = await api('document', { url, limit: String(MAX_CHILDREN), context });
    meta.textContent = metaText(page.header, label);
    let count = 0;
    for (const e of page.entries) {
      for (const c of e.children ?? []) {
        const name = CAPABILITY_NAMES[c.context.capability] ?? c.context.capability;
        const child = treeNode(c.url, `${name}: ${shortName(c.url)}`, c.context, depth + 1);
        node.childNodes.push(child);
        children.append(child.li);
        count++;
      }
      if (page.header.kind === 'capability-list') noteCapability(e);
    }
    if (page.more)
      children.append(
        el('li', { class: 'meta', text: `more than ${MAX_CHILDREN} entries: open the document to page through them` }),
      );
    if (count === 0) {
      twisty.disabled = true;
      twisty.setAttribute('aria-label', `${label} lists no other documents`);
    }
  }
  summaryOf(url, context)
    .then((s) => {
      if (s.header !== undefined) meta.textContent = metaText(s.header, label);
      badges.replaceChildren(...summaryBadge(s));
    })
    .catch((e) => badges.replaceChildren(el('span', { class: 'badge error', text: e.message })));
  return node;
}

function shortName(url) {
  try {
    const u = new URL(url);
    return u.pathname.split('/').filter(Boolean).slice(-2).join('/') || u.host;
  } catch {
    return url;
  }
}

/** Capability List entries that are not documents: notification channels (N-§3). */
function noteCapability(entry) {
  const cap = entry.md?.capability;
  if (cap === 'change-notification' && /^wss?:\/\//i.test(entry.loc)) showLive(entry.loc);
  if (cap === 'changelist' && isHttp(entry.loc)) loadChanges(entry.loc);
}

const treeRoots = [];

async function explore(url) {
  status('Discovering…');
  $('tree').textContent = '';
  $('discovery-path').textContent = '';
  treeRoots.length = 0;
  const found = await api('discover', { url });
  for (const step of found.path ?? []) $('discovery-path').append(el('li', { text: step }));
  if (found.error !== undefined) {
    status(found.error.message, true);
    return;
  }
  if (url === undefined && found.start !== undefined) $('start-url').value = found.start;
  if (found.sourceDescription !== undefined) {
    const top = found.sourceDescriptionIndex === undefined ? 'Source Description' : 'Source Description Index';
    const sd = treeNode(found.sourceDescription, top, undefined, 0);
    treeRoots.push(sd);
    $('tree').append(sd.li);
    await sd.expand();
    // The chosen (or only) Capability List is opened too.
    const chosen = found.set === undefined ? undefined : sd.childNodes.find((n) => n.url === found.set.url);
    if (chosen !== undefined) await chosen.expand();
  } else if (found.set !== undefined) {
    const cap = treeNode(found.set.url, 'Capability List', undefined, 0);
    treeRoots.push(cap);
    $('tree').append(cap.li);
    await cap.expand();
  } else if (found.direct !== undefined) {
    const doc = treeNode(found.direct.url, kindName(found.direct.kind), undefined, 0);
    treeRoots.push(doc);
    $('tree').append(doc.li);
  }
  const first = found.set?.url ?? found.direct?.url ?? found.sourceDescription;
  if (first !== undefined && !location.hash.startsWith('#doc=')) await openDocument(first);
  status(`Discovered ${found.sets.length} set(s).`);
}

// ---------------------------------------------------------------------------------------------------------
// The document view: header, summary (issues), a page of entries, search.

async function openDocument(url, context, offset = 0) {
  current = { url, offset, context, header: undefined };
  for (const b of document.querySelectorAll('.doc-link[aria-current]')) b.removeAttribute('aria-current');
  for (const b of document.querySelectorAll(`.doc-link[data-url="${CSS.escape(url)}"]`))
    b.setAttribute('aria-current', 'true');
  const hash = `#doc=${encodeURIComponent(url)}${offset > 0 ? `&offset=${offset}` : ''}`;
  if (location.hash !== hash) history.replaceState(null, '', hash);
  $('document').hidden = false;
  $('search-results').hidden = true;
  status(`Reading ${url}…`);
  const page = await api('document', { url, offset: String(offset), limit: String(PAGE), context });
  if (current.url !== url || current.offset !== offset) return;
  current.header = page.header;
  $('doc-title').textContent = kindName(page.header.kind);
  $('doc-url').replaceChildren(urlNode(page.url));
  renderHeader(page.header);
  renderEntries(page);
  status(page.error === undefined ? '' : page.error.message, page.error !== undefined);
  $('doc-summary').textContent = 'Reading the whole document…';
  summaryOf(url, context).then(
    (s) => {
      if (current.url === url) renderSummary(s);
    },
    (e) => {
      if (current.url === url) $('doc-summary').textContent = e.message;
    },
  );
}

function renderHeader(header) {
  const dl = $('doc-header');
  dl.textContent = '';
  const md = header.md ?? {};
  const add = (k, v) => dl.append(el('dt', { text: k }), el('dd', {}, v));
  add('kind', document.createTextNode(kindName(header.kind)));
  for (const [k, v] of Object.entries(md)) if (typeof v !== 'object') add(k, document.createTextNode(String(v)));
  for (const l of header.links ?? []) {
    const dd = el('span', {}, urlNode(l.href));
    if (isHttp(l.href) && (l.rel === 'up' || l.rel === 'index'))
      dd.append(
        ' ',
        el('button', { type: 'button', text: 'open', onclick: () => openDocument(new URL(l.href, current.url).href) }),
      );
    add(`link ${l.rel}`, dd);
  }
}

function renderSummary(s) {
  const box = $('doc-summary');
  box.textContent = '';
  const facts = [`${s.entries} entries`];
  if (typeof s.bytes === 'number') facts.push(formatBytes(s.bytes));
  for (const [c, n] of Object.entries(s.changes ?? {})) facts.push(`${n} ${c}`);
  if (s.lastmod) facts.push(`lastmod ${s.lastmod.min} – ${s.lastmod.max}`);
  if (s.datetime) facts.push(`datetime ${s.datetime.min} – ${s.datetime.max}`);
  box.append(el('p', { text: facts.join(' · ') }), ...summaryBadge(s).slice(1));
  const body = $('doc-issues').tBodies[0];
  body.textContent = '';
  for (const i of s.issues) {
    body.append(
      el(
        'tr',
        {},
        el('td', { class: i.severity, text: i.severity }),
        el('td', { text: i.code }),
        el('td', { text: i.section }),
        el('td', { text: where(i) }),
        el('td', { text: i.message }),
      ),
    );
  }
  $('doc-issues-title').textContent =
    `Issues: ${s.errors} error(s), ${s.warnings} warning(s)${s.suppressed > 0 ? ` (${s.suppressed} not shown)` : ''}`;
  $('doc-issues-box').open = s.issues.length > 0;
}

function renderEntries(page) {
  const body = $('entries').tBodies[0];
  body.textContent = '';
  page.entries.forEach((e, i) => {
    const md = e.md ?? {};
    const n = page.offset + i + 1;
    body.append(
      el(
        'tr',
        {},
        el('td', { text: String(n) }),
        el(
          'td',
          { class: 'uri' },
          el('button', { class: 'loc', type: 'button', text: e.loc, onclick: () => openResource(e) }),
        ),
        el('td', { text: e.lastmod ?? '' }),
        el('td', { text: md.change ?? md.capability ?? '' }),
        el('td', { text: md.datetime ?? md.at ?? md.from ?? '' }),
        el('td', { text: md.length === undefined ? '' : String(md.length) }),
        el('td', { text: md.type ?? '' }),
      ),
    );
  });
  const last = page.offset + page.entries.length;
  $('entries-caption').textContent =
    page.entries.length === 0 ? 'No entries' : `Entries ${page.offset + 1}–${last}${page.more ? '' : ' (end)'}`;
  $('page-info').textContent = page.entries.length === 0 ? '' : `${page.offset + 1}–${last}`;
  $('prev').disabled = page.offset === 0;
  $('next').disabled = !page.more;
}

async function search(cursor) {
  const q = $('search-q').value.trim();
  if (current.url === undefined || q === '') return;
  status(`Searching ${current.url}…`);
  const r = await api('search', { url: current.url, q, cursor });
  const list = $('search-list');
  if (cursor === undefined) list.textContent = '';
  for (const m of r.matches)
    list.append(
      el(
        'li',
        {},
        el('button', { class: 'loc', type: 'button', text: m.value.loc, onclick: () => openResource(m.value) }),
      ),
    );
  $('search-results').hidden = false;
  $('search-title').textContent = `Search results for “${q}”: ${list.children.length}`;
  const more = $('search-more');
  more.hidden = r.cursor === undefined;
  more.onclick = () => search(r.cursor).catch((e) => status(e.message, true));
  status(`${r.matches.length} match(es) in ${r.scanned} entries${r.cursor === undefined ? '' : '; more may follow'}.`);
}

// ---------------------------------------------------------------------------------------------------------
// Resource detail and fixity.

let currentResource;

function openResource(entry) {
  currentResource = entry;
  const section = $('resource');
  section.hidden = false;
  $('res-url').replaceChildren(urlNode(entry.loc));
  const dl = $('res-md');
  dl.textContent = '';
  if (entry.lastmod !== undefined) dl.append(el('dt', { text: 'lastmod' }), el('dd', { text: entry.lastmod }));
  for (const [k, v] of Object.entries(entry.md ?? {}))
    if (typeof v !== 'object') dl.append(el('dt', { text: k }), el('dd', { text: String(v) }));
  const links = $('res-links');
  links.textContent = '';
  for (const l of entry.links ?? []) {
    const extra = ['type', 'length', 'hash', 'pri', 'modified', 'path']
      .filter((k) => l[k] !== undefined)
      .map((k) => `${k}=${l[k]}`);
    links.append(el('li', {}, `${l.rel}: `, urlNode(l.href), extra.length > 0 ? ` (${extra.join(', ')})` : ''));
  }
  if (links.children.length === 0) links.append(el('li', { text: 'none' }));
  const child = entry.children?.[0];
  $('res-open').hidden = child === undefined;
  $('res-open').onclick = () => child !== undefined && openDocument(child.url, child.context);
  $('fixity').disabled = !isHttp(entry.loc);
  $('fixity-result').textContent = '';
  $('fixity-result').className = 'fixity';
  $('res-title').focus?.();
  section.scrollIntoView?.({ block: 'nearest' });
}

async function checkFixity() {
  const e = currentResource;
  if (e === undefined) return;
  const out = $('fixity-result');
  out.className = 'fixity';
  out.textContent = 'Fetching…';
  try {
    const md = e.md ?? {};
    const r = await api('fixity', {
      url: e.loc,
      length: md.length === undefined ? undefined : String(md.length),
      hash: md.hash,
    });
    const parts = [`HTTP ${r.status}, ${r.length} bytes in ${r.ms} ms`];
    if (r.lengthMatch === true) parts.push('length matches');
    if (r.lengthMatch === false) parts.push(`length differs: the list says ${r.expected.length}`);
    if (r.hashMatch === true) parts.push('hash matches');
    if (r.hashMatch === false)
      parts.push(
        `hash differs: got ${Object.entries(r.hashes)
          .map(([a, h]) => `${a}:${h}`)
          .join(' ')}`,
      );
    if (r.lengthMatch === undefined && r.hashMatch === undefined) parts.push('the list gives neither length nor hash');
    out.textContent = `${r.ok ? 'Fixity OK' : 'Fixity FAILED'}: ${parts.join('; ')}`;
    out.className = `fixity ${r.ok ? 'ok' : 'bad'}`;
  } catch (err) {
    out.textContent = `Fixity check failed: ${err.message}`;
    out.className = 'fixity bad';
  }
}

// ---------------------------------------------------------------------------------------------------------
// The plot of changes.

const SVG = 'http://www.w3.org/2000/svg';
let changesUrl;

function svg(tag, attrs = {}, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  for (const c of children) e.append(c);
  return e;
}

async function loadChanges(url) {
  if (changesUrl === url) return;
  changesUrl = url;
  $('changes').hidden = false;
  $('changes-info').textContent = 'Counting changes…';
  try {
    const r = await api('changes', { url });
    renderPlot(r);
  } catch (e) {
    $('changes-info').textContent = e.message;
  }
}

function renderPlot(r) {
  const buckets = r.buckets;
  $('changes-info').textContent =
    `${r.total} change(s) per ${r.bucket} (UTC)${r.undated > 0 ? `; ${r.undated} without datetime` : ''}.`;
  const plot = $('plot');
  plot.textContent = '';
  const body = $('changes-table').tBodies[0];
  body.textContent = '';
  if (buckets.length === 0) return;
  const W = 800;
  const H = 200;
  const pad = { l: 40, r: 10, t: 10, b: 24 };
  const max = Math.max(...buckets.map((b) => b.created + b.updated + b.deleted + b.other), 1);
  const t0 = Date.parse(buckets[0].start);
  // At least 12 buckets wide, so that a few changes do not make one bar across the whole plot.
  const t1 = Math.max(Date.parse(buckets[buckets.length - 1].start) + r.bucketMs, t0 + 12 * r.bucketMs);
  const x = (t) => pad.l + ((t - t0) / (t1 - t0)) * (W - pad.l - pad.r);
  const y = (n) => H - pad.b - (n / max) * (H - pad.t - pad.b);
  const chart = svg('svg', {
    viewBox: `0 0 ${W} ${H}`,
    role: 'img',
    'aria-labelledby': 'changes-h changes-info',
    preserveAspectRatio: 'none',
  });
  for (const b of buckets) {
    const start = Date.parse(b.start);
    const bx = x(start);
    const bw = Math.max(1, x(start + r.bucketMs) - bx - 1);
    let base = 0;
    for (const k of ['created', 'updated', 'deleted', 'other']) {
      const n = b[k];
      if (n === 0) continue;
      const rect = svg('rect', { class: k, x: bx, y: y(base + n), width: bw, height: y(base) - y(base + n) });
      rect.append(svg('title', {}, document.createTextNode(`${b.start}: ${n} ${k}`)));
      chart.append(rect);
      base += n;
    }
    body.append(
      el(
        'tr',
        {},
        el('td', { text: b.start }),
        el('td', { text: String(b.created) }),
        el('td', { text: String(b.updated) }),
        el('td', { text: String(b.deleted) }),
        el('td', { text: String(b.other) }),
      ),
    );
  }
  const label = (tx, ty, text, anchor = 'start') =>
    svg('text', { x: tx, y: ty, 'text-anchor': anchor }, document.createTextNode(text));
  chart.append(
    svg('line', { x1: pad.l, y1: H - pad.b, x2: W - pad.r, y2: H - pad.b, stroke: '#8c959f' }),
    label(pad.l - 4, pad.t + 10, String(max), 'end'),
    label(pad.l - 4, H - pad.b, '0', 'end'),
    label(pad.l, H - 6, buckets[0].start.slice(0, 16).replace('T', ' ')),
    label(W - pad.r, H - 6, new Date(t1).toISOString().slice(0, 16).replace('T', ' '), 'end'),
  );
  plot.append(chart);
}

// ---------------------------------------------------------------------------------------------------------
// Live notifications (server-sent events relayed from the Source's WebSocket channel).

let liveChannel;
let liveSource;

function showLive(channel) {
  if (liveChannel !== undefined) return;
  liveChannel = channel;
  $('live').hidden = false;
  $('live-channel').textContent = `Channel ${channel}`;
}

function toggleLive() {
  const button = $('live-toggle');
  if (liveSource !== undefined) {
    liveSource.close();
    liveSource = undefined;
    button.textContent = 'Listen';
    $('live-state').textContent = 'stopped';
    return;
  }
  liveSource = new EventSource(`api/notifications?${new URLSearchParams({ url: liveChannel })}`);
  button.textContent = 'Stop';
  $('live-state').textContent = 'connecting…';
  liveSource.addEventListener('connected', () => {
    $('live-state').textContent = 'connected';
  });
  liveSource.addEventListener('disconnected', (ev) => {
    $('live-state').textContent = `disconnected: ${JSON.parse(ev.data).reason}`;
  });
  liveSource.addEventListener('notification', (ev) => {
    const n = JSON.parse(ev.data);
    const list = $('live-list');
    for (const c of n.changes) {
      const uri = c.uri ?? c.url ?? '';
      list.prepend(el('li', { class: c.change }, `${n.receivedAt} ${c.change} `, urlNode(uri)));
    }
    while (list.children.length > 500) list.lastElementChild.remove();
  });
}

// ---------------------------------------------------------------------------------------------------------
// Check every document: expand the whole tree (bounded) so every document gets its summary.

async function checkAll() {
  const button = $('check-all');
  button.disabled = true;
  let visited = 0;
  const queue = [...treeRoots];
  try {
    while (queue.length > 0 && visited < MAX_CHECKED) {
      const node = queue.shift();
      visited++;
      status(`Checking documents: ${visited}…`);
      await node.expand();
      queue.push(...node.childNodes);
    }
    await Promise.allSettled([...summaries.values()].map((s) => s.promise));
    status(`Checked ${issuesByDoc.size} document(s)${visited >= MAX_CHECKED ? ` (stopped at ${MAX_CHECKED})` : ''}.`);
  } catch (e) {
    status(e.message, true);
  } finally {
    button.disabled = false;
  }
}

// ---------------------------------------------------------------------------------------------------------

function fromHash() {
  const m = /^#doc=([^&]*)(?:&offset=(\d+))?/.exec(location.hash);
  if (m === null) return undefined;
  return { url: decodeURIComponent(m[1]), offset: Number(m[2] ?? 0) };
}

function start() {
  const fail = (e) => status(e.message, true);
  $('start-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const url = $('start-url').value.trim();
    if (url === '') return;
    history.replaceState(null, '', `?${new URLSearchParams({ url })}`);
    explore(url).catch(fail);
  });
  $('prev').addEventListener('click', () =>
    openDocument(current.url, current.context, Math.max(0, current.offset - PAGE)).catch(fail),
  );
  $('next').addEventListener('click', () =>
    openDocument(current.url, current.context, current.offset + PAGE).catch(fail),
  );
  $('search-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    search(undefined).catch(fail);
  });
  $('fixity').addEventListener('click', () => {
    checkFixity().catch(fail);
  });
  $('live-toggle').addEventListener('click', toggleLive);
  $('check-all').addEventListener('click', () => {
    checkAll().catch(fail);
  });
  const given = new URLSearchParams(location.search).get('url') ?? undefined;
  if (given !== undefined) $('start-url').value = given;
  const target = fromHash();
  explore(given)
    .then(() => (target === undefined ? undefined : openDocument(target.url, undefined, target.offset)))
    .catch(fail);
}

start();
