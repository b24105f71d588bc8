/**
 * The little XML the small AWS clients read and write (S3's REST answers, STS's query-protocol
 * answers): a field's text by its tag, and text escaped for an element.
 */
export const xmlText = (s: string) => s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&amp;/g, '&');

/** The unescaped text of the first `<tag>…</tag>` in `xml`, or undefined. */
export const xmlField = (xml: string, tag: string): string | undefined => {
  const m = new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml);
  return m ? xmlText(m[1]!) : undefined;
};

export const xmlEscape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
