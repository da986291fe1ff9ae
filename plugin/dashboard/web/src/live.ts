import { useEffect, useRef, useState } from 'react';
import { authorized, get } from './api';

// useStream follows a stream of server-sent events, read with fetch, which
// can carry the token's header (EventSource cannot), calling on[name] with
// each event's data. A stream the server ends is opened again.
export function useStream(url: string, on: Record<string, (data: string) => void>) {
  const handlers = useRef(on);
  handlers.current = on;
  useEffect(() => {
    const ctl = new AbortController();
    const follow = async () => {
      while (!ctl.signal.aborted) {
        try {
          const r = await fetch(url, authorized({ signal: ctl.signal }));
          if (r.ok && r.body) {
            const reader = r.body.getReader();
            const dec = new TextDecoder();
            let buf = '';
            for (;;) {
              const { value, done } = await reader.read();
              if (done) break;
              buf += dec.decode(value, { stream: true });
              const events = buf.split('\n\n');
              buf = events.pop() ?? '';
              for (const e of events) {
                let name = 'message';
                let data = '';
                for (const line of e.split('\n')) {
                  if (line.startsWith('event: ')) name = line.slice(7);
                  else if (line.startsWith('data: ')) data += line.slice(6);
                }
                handlers.current[name]?.(data);
              }
            }
          }
        } catch {
          /* aborted, or the server went away: try again */
        }
        await new Promise((res) => setTimeout(res, 1000));
      }
    };
    follow();
    return () => ctl.abort();
  }, [url]);
}

// useLive reads url, and reads it again whenever the server's watch says
// what it shows changed. One read at a time, and each read that ends is
// shown (unless the page moved to another url): changes that come during a
// read are read once, when it ends. A job that changes faster than it can
// be read then costs one read after another, never many at once, and its
// page shows each answer rather than wait for the changes to stop.
export function useLive<T>(url: string, watch: string): { data?: T; error?: string; reload: () => void } {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<string>();
  const [tick, setTick] = useState(0);
  const current = useRef(url);
  current.current = url;
  const reading = useRef(false);
  const again = useRef(false);
  useEffect(() => () => { current.current = ''; }, []);
  useEffect(() => {
    if (reading.current) {
      again.current = true;
      return;
    }
    reading.current = true;
    get<T>(url).then(
      (d) => { if (current.current === url) { setData(d); setError(undefined); } },
      (e: Error) => { if (current.current === url) setError(e.message); },
    ).finally(() => {
      reading.current = false;
      if (again.current) {
        again.current = false;
        setTick((t) => t + 1);
      }
    });
  }, [url, tick]);
  useStream(watch, { changed: () => setTick((t) => t + 1) });
  return { data, error, reload: () => setTick((t) => t + 1) };
}

export function age(iso: string, now = Date.now()): string {
  return duration((now - Date.parse(iso)) / 1000);
}

export function duration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h${m % 60 ? `${m % 60}m` : ''}`;
  return `${Math.floor(h / 24)}d`;
}
