/**
 * D24: the worker app's optional form fields. A position is decimal degrees; an empty field is no
 * position at all (read as 0,0 it would put the capture in the Gulf of Guinea, and a job with a
 * point and radius would reject the file as a location mismatch).
 */
import { parseDeviceFields } from '../../shared/work/upload-request';

test('an empty or blank latitude/longitude is no position, not 0,0', () => {
  expect(parseDeviceFields({ latitude: '', longitude: ' ' })).toEqual({});
});

test('decimal degrees are read; anything else is 400 on the field', () => {
  expect(parseDeviceFields({ latitude: '48.8584', longitude: '-2.2945' })).toEqual({ latitude: 48.8584, longitude: -2.2945 });
  for (const [field, value] of [['latitude', '0x1A'], ['latitude', '1e1'], ['longitude', 'east'], ['latitude', '91']] as const) {
    expect(() => parseDeviceFields({ [field]: value })).toThrow(expect.objectContaining({ status: 400, details: [expect.objectContaining({ field })] }));
  }
});
