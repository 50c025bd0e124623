// connection.js: the websocket to the dashboard server, reconnecting on loss.
// Pushes and replies are dispatched by their "type"; request() tags a
// message with "req" and resolves with the reply that carries the same tag.

export class Connection {
  constructor(url) {
    this.url = url;
    this.handlers = new Map();
    this.statusHandlers = [];
    this.pending = new Map();
    this.nextReq = 1;
    this.retryMs = 500;
    this.socket = null;
    this.connect();
  }

  on(type, handler) {
    this.handlers.set(type, handler);
  }

  onStatus(handler) {
    this.statusHandlers.push(handler);
  }

  setStatus(state) {
    for (const handler of this.statusHandlers) {
      handler(state);
    }
  }

  connect() {
    this.setStatus('connecting');
    const socket = new WebSocket(this.url);
    this.socket = socket;
    socket.addEventListener('open', () => {
      this.retryMs = 500;
      this.setStatus('open');
    });
    socket.addEventListener('message', (event) => this.receive(event.data));
    socket.addEventListener('close', () => {
      this.socket = null;
      for (const { reject } of this.pending.values()) {
        reject(new Error('connection lost'));
      }
      this.pending.clear();
      this.setStatus('closed');
      setTimeout(() => this.connect(), this.retryMs);
      this.retryMs = Math.min(this.retryMs * 2, 5000);
    });
  }

  receive(data) {
    let msg;
    try {
      msg = JSON.parse(data);
    } catch {
      return;
    }
    if (msg === null || typeof msg !== 'object') {
      return;
    }
    if (msg.req !== undefined && this.pending.has(msg.req)) {
      const { resolve } = this.pending.get(msg.req);
      this.pending.delete(msg.req);
      resolve(msg);
      return;
    }
    const handler = this.handlers.get(msg.type);
    if (handler) {
      handler(msg);
    }
  }

  send(msg) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) {
      this.socket.send(JSON.stringify(msg));
      return true;
    }
    return false;
  }

  // Resolves with the reply (which may be {"type": "error"}); rejects if not connected.
  request(msg) {
    const req = this.nextReq++;
    return new Promise((resolve, reject) => {
      if (!this.send({ ...msg, req })) {
        reject(new Error('not connected'));
        return;
      }
      this.pending.set(req, { resolve, reject });
    });
  }
}
