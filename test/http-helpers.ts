/** Raw HTTP and WebSocket attempts for tests of the loopback front door (the web UI and the gateway). */
import { request } from 'node:http';
import { WebSocket } from 'ws';

export interface Answer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

/** A raw request: unlike fetch() it sends whatever Host and Origin it is given, as a DNS-rebound page's browser would. */
export function get(url: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers, method }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Resolves 'open' or the refusal (`Unexpected server response: 403`). */
export function tryWebSocket(url: string, headers: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { headers });
    ws.on('open', () => {
      ws.close();
      resolve('open');
    });
    ws.on('error', (e) => resolve(e.message));
  });
}
