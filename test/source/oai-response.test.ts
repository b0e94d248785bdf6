/**
 * The OAI-PMH response reader: records re-serialized as standalone documents, the envelope's fields, and
 * refusals (DTD, malformed XML, not OAI-PMH, limits), whatever the chunking.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SaxesParser } from 'saxes';
import { ResourceSyncError } from '../../src/core/errors.js';
import { type OaiItem, OaiResponseParser, type OaiResponseInfo } from '../../src/source/oai/response.js';

const OAI = 'http://www.openarchives.org/OAI/2.0/';

function parse(
  text: string,
  splits: number[] = [],
  maxRecordChars?: number,
): { items: OaiItem[]; info: OaiResponseInfo } {
  const p = new OaiResponseParser({ url: 'http://p/oai', ...(maxRecordChars === undefined ? {} : { maxRecordChars }) });
  const items: OaiItem[] = [];
  let at = 0;
  for (const s of [...splits, text.length]) {
    p.write(text.slice(at, s));
    items.push(...p.takeItems());
    at = s;
  }
  const info = p.close();
  items.push(...p.takeItems());
  return { items, info };
}

function rejects(text: string, code: string, messagePart?: RegExp): ResourceSyncError {
  let err: unknown;
  try {
    parse(text);
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof ResourceSyncError, `expected a ResourceSyncError, got ${String(err)}`);
  assert.equal(err.code, code, err.message);
  if (messagePart !== undefined) assert.match(err.message, messagePart);
  assert.equal(err.url, 'http://p/oai');
  return err;
}

const LIST = `<?xml version="1.0" encoding="UTF-8"?>
<OAI-PMH xmlns="${OAI}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:dcterms="http://purl.org/dc/terms/">
  <responseDate>2024-05-01T10:00:00Z</responseDate>
  <request verb="ListRecords" metadataPrefix="oai_dc">http://p/oai</request>
  <ListRecords>
    <record>
      <header><identifier>oai:p:1</identifier><datestamp>2024-04-30T09:08:07Z</datestamp><setSpec>a</setSpec><setSpec>a:b</setSpec></header>
      <metadata>
        <oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc='http://purl.org/dc/elements/1.1/'><dc:title lang='en'>A &amp; B <![CDATA[<c>]]></dc:title><dc:date xsi:type="dcterms:W3CDTF">2024</dc:date><!-- note --><dc:empty></dc:empty></oai_dc:dc>
      </metadata>
      <about><provenance>x</provenance></about>
    </record>
    <record>
      <header status="deleted"><identifier>oai:p:2</identifier><datestamp>2024-04-30</datestamp></header>
    </record>
    <record>
      <header><identifier>oai:p:3</identifier><datestamp>2024-04-30T00:00:00Z</datestamp></header>
      <metadata><record xmlns="http://www.loc.gov/MARC21/slim"><leader>00000</leader></record></metadata>
    </record>
    <record>
      <header><identifier>oai:p:4</identifier><datestamp>2024-04-30T00:00:00Z</datestamp></header>
      <metadata><thing>in the OAI namespace by default</thing></metadata>
    </record>
    <resumptionToken completeListSize="10" cursor="0" expirationDate="2024-05-02T00:00:00Z">next-1</resumptionToken>
  </ListRecords>
</OAI-PMH>
`;

describe('OaiResponseParser', () => {
  it('reads records, headers, the token and the response date', () => {
    const { items, info } = parse(LIST);
    assert.equal(info.verb, 'ListRecords');
    assert.equal(info.responseDate, '2024-05-01T10:00:00Z');
    assert.deepEqual(info.resumptionToken, {
      value: 'next-1',
      completeListSize: 10,
      cursor: 0,
      expirationDate: '2024-05-02T00:00:00Z',
    });
    assert.equal(items.length, 4);
    const [a, b, c, d] = items as [OaiItem, OaiItem, OaiItem, OaiItem];
    assert.deepEqual(a.header.setSpecs, ['a', 'a:b']);
    assert.equal(a.header.datestampMs, Date.UTC(2024, 3, 30, 9, 8, 7));
    assert.equal(b.header.deleted, true);
    assert.equal(b.metadata, undefined);
    assert.equal(b.header.datestampMs, Date.UTC(2024, 3, 30));
    // Inherited prefixed declarations are copied (xsi and dcterms: dcterms is used in an attribute value);
    // the inherited default (OAI) namespace is not, since no unprefixed element uses it; CDATA becomes text,
    // an empty element is written <x/>, the comment stays.
    assert.equal(
      a.metadata,
      '<?xml version="1.0" encoding="UTF-8"?>\n' +
        '<oai_dc:dc xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:dcterms="http://purl.org/dc/terms/" ' +
        'xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/">' +
        '<dc:title lang="en">A &amp; B &lt;c&gt;</dc:title><dc:date xsi:type="dcterms:W3CDTF">2024</dc:date>' +
        '<!-- note --><dc:empty/></oai_dc:dc>\n',
    );
    assert.match(
      c.metadata ?? '',
      /^<\?xml[^>]*>\n<record xmlns:xsi="[^"]*" xmlns:dcterms="[^"]*" xmlns="http:\/\/www.loc.gov\/MARC21\/slim"><leader>/,
    );
    // An unprefixed element in the inherited default namespace keeps it.
    assert.match(
      d.metadata ?? '',
      /<thing xmlns="http:\/\/www.openarchives.org\/OAI\/2.0\/" xmlns:xsi="[^"]*" xmlns:dcterms="[^"]*">/,
    );
    // Each record is a well-formed standalone document with the same names in the same namespaces.
    for (const item of [a, c, d]) {
      const sax = new SaxesParser({ xmlns: true });
      const names: string[] = [];
      sax.on('opentag', (t) => names.push(`{${t.uri}}${t.local}`));
      sax.write(item.metadata!).close();
      assert.ok(names.length > 0);
    }
  });

  it('gives the same items and bytes at every chunk split', () => {
    const whole = parse(LIST);
    for (let i = 1; i < LIST.length; i += 7) {
      const split = parse(LIST, [i, Math.min(LIST.length, i + 3)]);
      assert.deepEqual(
        split.items.map((x) => [x.header, x.metadata]),
        whole.items.map((x) => [x.header, x.metadata]),
      );
      assert.deepEqual(split.info.resumptionToken, whole.info.resumptionToken);
    }
  });

  it('reads Identify, ListMetadataFormats and errors', () => {
    const id = parse(
      `<OAI-PMH xmlns="${OAI}"><responseDate>2024-05-01T10:00:00Z</responseDate><request verb="Identify">x</request>` +
        '<Identify><repositoryName>R</repositoryName><baseURL>http://p/oai</baseURL><protocolVersion>2.0</protocolVersion>' +
        '<adminEmail>a@p</adminEmail><adminEmail>b@p</adminEmail><earliestDatestamp>2000-01-01</earliestDatestamp>' +
        '<deletedRecord>transient</deletedRecord><granularity>YYYY-MM-DD</granularity><compression>gzip</compression>' +
        '<description><oai-identifier xmlns="http://www.openarchives.org/OAI/2.0/oai-identifier"><scheme>oai</scheme></oai-identifier></description>' +
        '</Identify></OAI-PMH>',
    );
    assert.deepEqual(id.info.identify, {
      repositoryName: 'R',
      baseURL: 'http://p/oai',
      protocolVersion: '2.0',
      earliestDatestamp: '2000-01-01',
      deletedRecord: 'transient',
      granularity: 'YYYY-MM-DD',
      adminEmails: ['a@p', 'b@p'],
      compressions: ['gzip'],
    });
    const formats = parse(
      `<OAI-PMH xmlns="${OAI}"><responseDate>2024-05-01T10:00:00Z</responseDate><ListMetadataFormats>` +
        '<metadataFormat><metadataPrefix>oai_dc</metadataPrefix><schema>s</schema><metadataNamespace>n</metadataNamespace></metadataFormat>' +
        '</ListMetadataFormats></OAI-PMH>',
    );
    assert.deepEqual(formats.info.formats, [{ metadataPrefix: 'oai_dc', schema: 's', metadataNamespace: 'n' }]);
    const err = parse(
      `<OAI-PMH xmlns="${OAI}"><responseDate>2024-05-01T10:00:00Z</responseDate><request>x</request>` +
        '<error code="badResumptionToken">expired</error><error code="badArgument"/></OAI-PMH>',
    );
    assert.deepEqual(err.info.errors, [
      { code: 'badResumptionToken', message: 'expired' },
      { code: 'badArgument', message: '' },
    ]);
    assert.equal(err.info.verb, undefined);
  });

  it('refuses a DTD, so no entity is ever expanded', () => {
    const e = rejects(
      `<?xml version="1.0"?>\n<!DOCTYPE OAI-PMH [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n<OAI-PMH xmlns="${OAI}">&x;</OAI-PMH>`,
      'RS_XML_DTD',
    );
    assert.equal(e.line, 2);
  });

  it('refuses an undefined entity and malformed XML with the line', () => {
    rejects(`<OAI-PMH xmlns="${OAI}"><responseDate>&nbsp;</responseDate></OAI-PMH>`, 'RS_XML_SYNTAX');
    const e = rejects(
      `<OAI-PMH xmlns="${OAI}">\n<responseDate>x</responseDate>\n<ListRecords>\n</ListRecord>\n</OAI-PMH>`,
      'RS_XML_SYNTAX',
    );
    assert.equal(e.line, 4);
    rejects(`<OAI-PMH xmlns="${OAI}"><ListRecords>`, 'RS_XML_SYNTAX');
    rejects('', 'RS_XML_SYNTAX', /root element/);
  });

  it('refuses what is not an OAI-PMH 2.0 response', () => {
    rejects('<html><body>Error 500</body></html>', 'RS_OAI_PMH', /root element is <html>/);
    rejects('<OAI-PMH xmlns="http://www.openarchives.org/OAI/1.1/OAI_ListRecords"/>', 'RS_OAI_PMH');
    rejects(`<?xml version="1.0" encoding="ISO-8859-1"?><OAI-PMH xmlns="${OAI}"/>`, 'RS_OAI_PMH', /UTF-8/);
  });

  it('refuses bad headers', () => {
    const wrap = (h: string): string =>
      `<OAI-PMH xmlns="${OAI}"><responseDate>2024-05-01T10:00:00Z</responseDate><ListIdentifiers>${h}</ListIdentifiers></OAI-PMH>`;
    rejects(wrap('<header><datestamp>2024-01-01</datestamp></header>'), 'RS_OAI_PMH', /without <identifier>/);
    rejects(wrap('<header><identifier>x</identifier></header>'), 'RS_OAI_PMH', /without <datestamp>/);
    rejects(
      wrap('<header><identifier>x</identifier><datestamp>yesterday</datestamp></header>'),
      'RS_OAI_PMH',
      /bad <datestamp>/,
    );
    rejects(
      `<OAI-PMH xmlns="${OAI}"><ListRecords><record><header><identifier>x</identifier><datestamp>2024-01-01</datestamp></header>` +
        '<metadata><a/><b/></metadata></record></ListRecords></OAI-PMH>',
      'RS_OAI_PMH',
      /more than one element/,
    );
  });

  it('bounds the size of a record and the depth', () => {
    const big = `<OAI-PMH xmlns="${OAI}"><ListRecords><record><header><identifier>x</identifier><datestamp>2024-01-01</datestamp></header><metadata><a>${'y'.repeat(5000)}</a></metadata></record></ListRecords></OAI-PMH>`;
    assert.throws(
      () => parse(big, [], 1000),
      (e: unknown) => e instanceof ResourceSyncError && e.code === 'RS_LIMIT',
    );
    assert.equal(parse(big, [], 10_000).items.length, 1);
    const deep = `<OAI-PMH xmlns="${OAI}">${'<x>'.repeat(300)}${'</x>'.repeat(300)}</OAI-PMH>`;
    rejects(deep, 'RS_LIMIT', /deeper than 256/);
  });
});
