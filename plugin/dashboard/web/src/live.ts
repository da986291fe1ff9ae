import { useEffect, useState } from 'react';
import { authorized, get } from './api';

// useLive reads url, and reads it again whenever the server's watch says
// what it shows changed.
export function useLive<T>(url: string, watch: string): { data?: T; error?: string; reload: () => void } {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<string>();
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let stale = false;
    get<T>(url).then(
      (d) => { if (!stale) { setData(d); setError(undefined); } },
      (e: Error) => { if (!stale) setError(e.message); },
    );
    return () => { stale = true; };
  }, [url, tick]);
  useEffect(() => {
    // Server-sent events read with fetch, which can carry the token's
    // header (EventSource cannot). A stream the server ends is opened
    // again, and opening it reads afresh.
    const ctl = new AbortController();
    const follow = async () => {
      while (!ctl.signal.aborted) {
        try {
          const r = await fetch(watch, authorized({ signal: ctl.signal }));
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
              if (events.some((e) => e.includes('event: changed'))) setTick((t) => t + 1);
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
  }, [watch]);
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
