/**
 * EXIF fields of an image (exifr, loaded on first use), and the date, offset and device
 * normalisers the container tags of ./probe-fields share.
 *
 * - captured_at: EXIF DateTimeOriginal (+ SubSecTimeOriginal) with OffsetTimeOriginal, read with
 *   exifr `reviveValues:false` (revival drops the offset). Without an offset tag, the offset is
 *   derived from the GPS UTC timestamp when present, else the time is returned without offset
 *   (a local time of unknown zone). Falls back to CreateDate/OffsetTimeDigitized. null when absent.
 * - device_model ("Make Model", Make not repeated when Model already starts with it),
 *   device_os (EXIF Software).
 * - latitude/longitude from EXIF GPS (exifr).
 */

const pad = (n: number, w = 2) => String(Math.abs(Math.trunc(n))).padStart(w, '0');

/** '+02:00', '-0530', '+2' → '+02:00'; null when not an offset. */
export function normalizeOffset(raw: unknown): string | null {
  if (typeof raw !== 'string') return null;
  const s = raw.trim();
  if (s === 'Z') return 'Z';
  const m = /^([+-])(\d{1,2}):?(\d{2})?$/.exec(s);
  if (!m) return null;
  const h = Number(m[2]);
  const mm = Number(m[3] ?? '0');
  if (h > 14 || mm > 59) return null;
  return `${m[1]}${pad(h)}:${pad(mm)}`;
}

/** EXIF 'YYYY:MM:DD HH:MM:SS' (+ subseconds, + offset) → ISO 8601; null when not a date. */
export function exifDateToIso(dateTime: unknown, offset?: unknown, subSec?: unknown): string | null {
  if (typeof dateTime !== 'string') return null;
  const m = /^(\d{4})[:-](\d{2})[:-](\d{2})[ T](\d{2}):(\d{2}):(\d{2})/.exec(dateTime.trim());
  if (!m || m[1] === '0000') return null;
  let frac = '';
  const ss = typeof subSec === 'string' || typeof subSec === 'number' ? String(subSec).trim() : '';
  if (/^\d+$/.test(ss)) frac = `.${ss.slice(0, 3).padEnd(3, '0')}`;
  const off = normalizeOffset(offset);
  return `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}${frac}${off ?? ''}`;
}

/** Offset between a local EXIF time and the GPS (UTC) time, rounded to 15 minutes. */
function offsetFromGps(local: string, gpsDate: unknown, gpsTime: unknown): string | null {
  if (typeof gpsDate !== 'string' || !Array.isArray(gpsTime) || gpsTime.length < 3) return null;
  const d = /^(\d{4})[:-](\d{2})[:-](\d{2})/.exec(gpsDate);
  if (!d) return null;
  const [h, mi, s] = gpsTime.map(Number) as [number, number, number];
  const utc = Date.UTC(Number(d[1]), Number(d[2]) - 1, Number(d[3]), h, mi, Math.floor(s));
  const l = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})/.exec(local)!;
  const loc = Date.UTC(Number(l[1]), Number(l[2]) - 1, Number(l[3]), Number(l[4]), Number(l[5]), Number(l[6]));
  const minutes = Math.round((loc - utc) / 60000 / 15) * 15;
  if (!Number.isFinite(minutes) || Math.abs(minutes) > 14 * 60) return null;
  const sign = minutes < 0 ? '-' : '+';
  return `${sign}${pad(Math.abs(minutes) / 60)}:${pad(Math.abs(minutes) % 60)}`;
}

export interface ExifFields {
  captured_at: string | null;
  device_model: string | null;
  device_os: string | null;
  latitude: number | null;
  longitude: number | null;
}

export const clean = (v: unknown): string | null => (typeof v === 'string' && v.replace(/\0/g, '').trim() ? v.replace(/\0/g, '').trim() : null);

export function deviceModel(make: unknown, model: unknown): string | null {
  const mk = clean(make);
  const md = clean(model);
  if (!md) return mk;
  if (!mk || md.toLowerCase().startsWith(mk.toLowerCase())) return md;
  return `${mk} ${md}`;
}

export const validLatLon = (lat: unknown, lon: unknown): lat is number =>
  typeof lat === 'number' && typeof lon === 'number' && Number.isFinite(lat) && Number.isFinite(lon) &&
  Math.abs(lat) <= 90 && Math.abs(lon) <= 180 && !(lat === 0 && lon === 0);

/** EXIF fields of an image (JPEG, PNG eXIf, WebP, HEIC…). Never throws: unreadable EXIF → all null. */
export async function readExif(input: Buffer | string): Promise<ExifFields> {
  const none: ExifFields = { captured_at: null, device_model: null, device_os: null, latitude: null, longitude: null };
  let tags: Record<string, unknown> | undefined;
  try {
    const mod = (await import('exifr')) as unknown as { default?: typeof import('exifr').default } & typeof import('exifr').default;
    const exifr = mod.default ?? mod;
    tags = (await exifr.parse(input, { reviveValues: false, tiff: true, exif: true, gps: true, ifd1: false, xmp: false, icc: false, iptc: false })) as
      | Record<string, unknown>
      | undefined;
  } catch {
    return none;
  }
  if (!tags) return none;
  let captured =
    exifDateToIso(tags.DateTimeOriginal, tags.OffsetTimeOriginal ?? tags.OffsetTime, tags.SubSecTimeOriginal) ??
    exifDateToIso(tags.CreateDate, tags.OffsetTimeDigitized ?? tags.OffsetTime, tags.SubSecTimeDigitized);
  if (captured && !/(Z|[+-]\d{2}:\d{2})$/.test(captured)) {
    const off = offsetFromGps(captured, tags.GPSDateStamp, tags.GPSTimeStamp);
    if (off) captured += off;
  }
  const lat = tags.latitude;
  const lon = tags.longitude;
  return {
    captured_at: captured,
    device_model: deviceModel(tags.Make, tags.Model),
    device_os: clean(tags.Software),
    latitude: validLatLon(lat, lon) ? Math.round(lat * 1e6) / 1e6 : null,
    longitude: validLatLon(lat, lon) ? Math.round((lon as number) * 1e6) / 1e6 : null,
  };
}
