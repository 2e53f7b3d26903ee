// <herald-inbox>: Herald's embeddable in-app inbox. One file, no framework, no
// build step. Served by Herald at /inbox/herald-inbox.js.
//
//   <script type="module" src="https://herald.example.com/inbox/herald-inbox.js"></script>
//   <herald-inbox api-base="https://herald.example.com" user-id="ada" token="eyJ..."></herald-inbox>
//
// Attributes:
//   api-base   Herald's base URL (default: the origin this script came from)
//   user-id    the user whose inbox this is
//   token      a user token (POST /v1/users/{user_id}/token, from your backend), or
//   tenant-id + user-hash   hex(HMAC-SHA256(inbox secret, user_id)), exchanged at
//              POST /v1/inbox/session for a token (renewed when it expires)
//
// Events (bubbling, composed): herald-inbox:counts {detail: counts},
// herald-inbox:token-expired (set a fresh token attribute to go on),
// herald-inbox:error {detail: message}.
const scriptOrigin = (() => {
  try { return new URL(import.meta.url).origin; } catch { return location.origin; }
})();

const css = `
:host { font: 14px/1.4 system-ui, sans-serif; color: #1d2433; display: inline-block; position: relative; }
button { font: inherit; cursor: pointer; }
.bell { border: 1px solid #c9cfdb; background: #fff; border-radius: 8px; padding: 6px 12px; }
.badge { display: inline-block; min-width: 1.4em; padding: 0 6px; margin-left: 6px; border-radius: 10px; background: #d92d20; color: #fff; text-align: center; }
.badge[data-count="0"] { background: #98a2b3; }
.panel { width: 360px; max-height: 480px; overflow: auto; border: 1px solid #c9cfdb; border-radius: 8px; background: #fff; margin-top: 6px; }
.panel[hidden] { display: none; }
header { display: flex; justify-content: space-between; align-items: center; padding: 8px 12px; border-bottom: 1px solid #eaecf0; }
ul { list-style: none; margin: 0; padding: 0; }
li { padding: 10px 12px; border-bottom: 1px solid #eaecf0; }
li.unread { background: #f0f5ff; }
li .title { font-weight: 600; }
li .meta { color: #667085; font-size: 12px; }
li .actions button { font-size: 12px; margin-right: 6px; border: 1px solid #c9cfdb; background: #fff; border-radius: 6px; padding: 2px 8px; }
.empty { padding: 16px 12px; color: #667085; }
.status { font-size: 12px; color: #667085; }
`;

class HeraldInbox extends HTMLElement {
  static get observedAttributes() { return ["token", "user-id", "api-base", "tenant-id", "user-hash"]; }

  constructor() {
    super();
    this.items = [];
    this.counts = { total: 0, unread: 0, unseen: 0 };
    this.lastEventId = null;
    this.source = null;
    const root = this.attachShadow({ mode: "open" });
    root.innerHTML = `<style>${css}</style>
      <button class="bell" part="bell" aria-haspopup="true">Inbox<span class="badge" part="badge" data-count="0">0</span></button>
      <div class="panel" part="panel">
        <header><span class="status" part="status">connecting…</span><button class="read-all" part="read-all">Mark all read</button><button class="preferences" part="preferences">Preferences</button></header>
        <ul part="list"></ul>
      </div>`;
    this.$badge = root.querySelector(".badge");
    this.$list = root.querySelector("ul");
    this.$panel = root.querySelector(".panel");
    this.$status = root.querySelector(".status");
    root.querySelector(".bell").addEventListener("click", () => {
      this.$panel.hidden = !this.$panel.hidden;
      if (!this.$panel.hidden && this.counts.unseen > 0) this.post("/seen-all");
    });
    root.querySelector(".read-all").addEventListener("click", () => this.post("/read-all"));
    // The hosted preference centre, by a signed link Herald makes for this user.
    root.querySelector(".preferences").addEventListener("click", async () => {
      try {
        const { url } = await this.api("/preferences-link", { method: "POST" });
        if (/^https?:\/\//.test(url)) window.open(url, "_blank", "noopener");
      } catch (err) { this.fail(err); }
    });
    this.$list.addEventListener("click", (e) => {
      const b = e.target.closest("button[data-action]");
      if (b) this.post(`/${encodeURIComponent(b.dataset.id)}/${b.dataset.action}`);
    });
  }

  connectedCallback() { this.start(); }
  disconnectedCallback() { this.stop(); }
  attributeChangedCallback(name, oldValue, newValue) {
    if (this.isConnected && oldValue !== newValue) this.start();
  }

  get base() { return (this.getAttribute("api-base") || scriptOrigin).replace(/\/+$/, ""); }
  get userId() { return this.getAttribute("user-id") || ""; }
  get inboxURL() { return `${this.base}/v1/users/${encodeURIComponent(this.userId)}/inbox`; }

  stop() {
    if (this.source) { this.source.close(); this.source = null; }
  }

  async start() {
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => this.run(), 0); // several attributes set at once start once
  }

  async run() {
    this.stop();
    if (!this.userId) return;
    try {
      this.token = this.getAttribute("token") || (await this.session());
      if (!this.token) return;
      await this.refetch();
      this.open();
    } catch (err) {
      this.fail(err);
    }
  }

  // session exchanges tenant-id + user-hash for a user token.
  async session() {
    const tenant = this.getAttribute("tenant-id"), hash = this.getAttribute("user-hash");
    if (!tenant || !hash) return "";
    const r = await fetch(`${this.base}/v1/inbox/session`, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ tenant_id: tenant, user_id: this.userId, user_hash: hash }),
    });
    if (!r.ok) throw new Error(`session: ${r.status}`);
    return (await r.json()).token;
  }

  async api(path, init = {}) {
    const r = await fetch(this.inboxURL + path, {
      ...init, headers: { Authorization: `Bearer ${this.token}`, ...(init.headers || {}) },
    });
    if (r.status === 401) { this.expired(); throw new Error("token expired"); }
    if (!r.ok) throw new Error(`${init.method || "GET"} ${path || "/"}: ${r.status}`);
    return r.json();
  }

  async refetch() {
    const page = await this.api("?limit=50");
    this.items = page.items;
    this.setCounts(page.counts);
    this.render();
  }

  async post(path) {
    try {
      const r = await this.api(path, { method: "POST" });
      if (r.counts) this.setCounts(r.counts);
      if (r.notification_id) this.upsert(r);
      this.render();
    } catch (err) { this.fail(err); }
  }

  open() {
    let url = `${this.inboxURL}/stream?access_token=${encodeURIComponent(this.token)}`;
    if (this.lastEventId !== null) url += `&last_event_id=${encodeURIComponent(this.lastEventId)}`;
    const es = new EventSource(url);
    this.source = es;
    const on = (type, fn) => es.addEventListener(type, (e) => {
      this.lastEventId = e.lastEventId;
      const data = JSON.parse(e.data);
      if (data.counts) this.setCounts(data.counts);
      fn(data);
      this.render();
    });
    on("ready", () => {});
    on("refetch", () => { this.refetch().catch((err) => this.fail(err)); });
    on("item.created", (ev) => this.upsert(ev.item));
    on("item.updated", (ev) => this.upsert(ev.item));
    on("all.read", () => { this.items.forEach((it) => { it.read_at ||= new Date().toISOString(); it.seen_at ||= it.read_at; }); });
    on("all.seen", () => { this.items.forEach((it) => { it.seen_at ||= new Date().toISOString(); }); });
    es.onopen = () => { this.$status.textContent = "live"; };
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) {
        // Refused (the token expired, or the stream limit): renew or ask for a token.
        this.$status.textContent = "disconnected";
        if (this.getAttribute("user-hash")) setTimeout(() => this.run(), 2000);
        else this.expired();
      } else {
        this.$status.textContent = "reconnecting…"; // EventSource retries with Last-Event-ID
      }
    };
  }

  upsert(item) {
    const i = this.items.findIndex((x) => x.notification_id === item.notification_id);
    if (item.archived_at) {
      if (i >= 0) this.items.splice(i, 1);
      return;
    }
    if (i >= 0) { this.items[i] = item; return; }
    // The feed is in due order, highest sequence first: a new item goes where its
    // sequence places it (an item.created marked late lands below newer ones).
    const at = this.items.findIndex((x) => before(item, x));
    if (at < 0) this.items.push(item);
    else this.items.splice(at, 0, item);
  }

  setCounts(c) {
    this.counts = c;
    this.$badge.textContent = String(c.unread);
    this.$badge.dataset.count = String(c.unread);
    this.dispatchEvent(new CustomEvent("herald-inbox:counts", { detail: c, bubbles: true, composed: true }));
  }

  expired() {
    this.stop();
    this.dispatchEvent(new CustomEvent("herald-inbox:token-expired", { bubbles: true, composed: true }));
  }

  fail(err) {
    this.$status.textContent = String(err.message || err);
    this.dispatchEvent(new CustomEvent("herald-inbox:error", { detail: String(err.message || err), bubbles: true, composed: true }));
  }

  render() {
    this.$list.replaceChildren();
    if (this.items.length === 0) {
      const li = document.createElement("li");
      li.className = "empty";
      li.textContent = "Nothing here yet.";
      this.$list.append(li);
      return;
    }
    for (const it of this.items) {
      const li = document.createElement("li");
      li.className = it.read_at ? "read" : "unread";
      li.dataset.id = it.notification_id;
      const title = document.createElement("div");
      title.className = "title";
      if (it.action_url && /^https?:/i.test(it.action_url)) {
        const a = document.createElement("a");
        a.href = it.action_url; a.textContent = it.title; a.rel = "noopener"; a.target = "_blank";
        title.append(a);
      } else title.textContent = it.title;
      const body = document.createElement("div");
      body.className = "body";
      body.textContent = it.body;
      const meta = document.createElement("div");
      meta.className = "meta";
      meta.textContent = new Date(it.created_at).toLocaleString() + (it.category ? ` · ${it.category}` : "");
      const actions = document.createElement("div");
      actions.className = "actions";
      const button = (action, label) => {
        const b = document.createElement("button");
        b.dataset.action = action; b.dataset.id = it.notification_id; b.textContent = label;
        actions.append(b);
      };
      button(it.read_at ? "unread" : "read", it.read_at ? "Mark unread" : "Mark read");
      button("archive", "Archive");
      li.append(title, body, meta, actions);
      this.$list.append(li);
    }
  }
}

// before: a is listed above b (the list's order: sequence, then notification id,
// both descending).
function before(a, b) {
  const sa = a.sequence || 0, sb = b.sequence || 0;
  if (sa !== sb) return sa > sb;
  return a.notification_id > b.notification_id;
}

if (!customElements.get("herald-inbox")) customElements.define("herald-inbox", HeraldInbox);
export { HeraldInbox };
