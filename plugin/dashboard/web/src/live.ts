import { useEffect, useState } from 'react';
import { get } from './api';

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
    const es = new EventSource(watch);
    es.addEventListener('changed', () => setTick((t) => t + 1));
    return () => es.close();
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
