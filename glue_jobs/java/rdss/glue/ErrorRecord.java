package rdss.glue;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Base64;
import java.util.HashSet;
import java.util.Locale;
import java.util.Set;
import java.util.zip.CRC32;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;

/**
 * What the audit compaction needs of one record of the errors archive: its errorCode and the
 * identity of the payload it stands for, as it was before decoration.
 *
 * <p>The rule is rdss/decoration.py's {@code original}, byte for byte (a test compares the two
 * on generated records):
 *
 * <ul>
 *   <li>a record whose top-level members are exactly messageHeader and originalPayload, the
 *       latter an object, is a wrapper: the payload is originalPayload.data, base64-decoded when
 *       its encoding is base64, as UTF-8 text when it is utf-8; with any other encoding (a
 *       Claim Check: s3, a directory) the payload is kept elsewhere and the wrapper carries its
 *       size and SHA-256;
 *   <li>otherwise the payload was decorated in place: the last top-level messageHeader member is
 *       an object that ends with {@code ,"errorCode":...,"errorDescription":...} (no comma when
 *       the header was empty) serialised compactly, as orjson writes strings; without those
 *       bytes the payload is that record less them.
 * </ul>
 *
 * <p>Returns the struct audit_compaction.ERROR_RECORD_FIELDS declares: errorCode (the last
 * messageHeader's, as text), the payload's SHA-256 in lower-case hex, its length in bytes and
 * its CRC-32 (null for a Claim Check, whose bytes are not here). The payload fields are null
 * when the record is not a decorated record. It never throws.
 */
public final class ErrorRecord implements UDF1<byte[], Row> {
    private static final long serialVersionUID = 1L;

    private static final JsonFactory JSON = new JsonFactory();
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    @Override
    public Row call(byte[] record) {
        Object[] row = new Object[4];
        if (record == null) {
            return RowFactory.create(row);
        }
        Members members = new Members();
        try (JsonParser parser = JSON.createParser(record)) {
            if (!members.read(parser) || parser.nextToken() != null) {
                return RowFactory.create(row);
            }
        } catch (IOException | RuntimeException notJson) {
            return RowFactory.create(row);
        }
        row[0] = members.errorCode;
        if (members.wrapped()) {
            Wrapper wrapper = members.wrapper;
            if (!wrapper.encoded) {
                return RowFactory.create(row);
            }
            if ("utf-8".equals(wrapper.encoding) || "base64".equals(wrapper.encoding)) {
                byte[] payload = wrapper.payload();
                if (payload != null) {
                    identify(payload, row);
                }
            } else if (wrapper.sha256 != null && wrapper.bytes != null) {
                // a Claim Check: the payload is kept elsewhere, the wrapper says its size and digest
                row[1] = wrapper.sha256.toLowerCase(Locale.ROOT);
                row[2] = wrapper.bytes;
            }
            return RowFactory.create(row);
        }
        byte[] payload = undecorated(record, members);
        if (payload != null) {
            identify(payload, row);
        }
        return RowFactory.create(row);
    }

    /** The record less the two members decoration inserted, or null if they are not there as inserted. */
    private static byte[] undecorated(byte[] record, Members members) {
        if (!members.header || members.code == null || members.description == null) {
            return null;
        }
        int closing = members.headerEnd - 1; // the header's closing brace
        byte[] inserted = concat(
                "\"errorCode\":".getBytes(StandardCharsets.UTF_8),
                quoted(members.code),
                ",\"errorDescription\":".getBytes(StandardCharsets.UTF_8),
                quoted(members.description));
        for (boolean empty : new boolean[] {false, true}) {
            byte[] insertion = empty ? inserted : concat(new byte[] {','}, inserted);
            int start = closing - insertion.length;
            if (start >= 0 && regionEquals(record, start, insertion)) {
                byte[] payload = new byte[record.length - insertion.length];
                System.arraycopy(record, 0, payload, 0, start);
                System.arraycopy(record, closing, payload, start, record.length - closing);
                return payload;
            }
        }
        return null;
    }

    private static void identify(byte[] payload, Object[] row) {
        try {
            MessageDigest sha256 = MessageDigest.getInstance("SHA-256");
            byte[] digest = sha256.digest(payload);
            char[] hex = new char[digest.length * 2];
            for (int i = 0; i < digest.length; i++) {
                hex[2 * i] = HEX[(digest[i] >> 4) & 0xf];
                hex[2 * i + 1] = HEX[digest[i] & 0xf];
            }
            row[1] = new String(hex);
        } catch (NoSuchAlgorithmException impossible) {
            throw new IllegalStateException("every Java platform has SHA-256", impossible);
        }
        CRC32 crc = new CRC32();
        crc.update(payload, 0, payload.length);
        row[2] = (long) payload.length;
        row[3] = crc.getValue();
    }

    /** A string as orjson serialises it: quote, backslash and control characters escaped, the rest as UTF-8. */
    static byte[] quoted(String text) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(text.length() + 2);
        out.write('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"':
                    ascii(out, "\\\"");
                    break;
                case '\\':
                    ascii(out, "\\\\");
                    break;
                case '\b':
                    ascii(out, "\\b");
                    break;
                case '\t':
                    ascii(out, "\\t");
                    break;
                case '\n':
                    ascii(out, "\\n");
                    break;
                case '\f':
                    ascii(out, "\\f");
                    break;
                case '\r':
                    ascii(out, "\\r");
                    break;
                default:
                    if (c < 0x20) {
                        ascii(out, String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else if (c < 0x80) {
                        out.write(c);
                    } else {
                        int end = Character.isHighSurrogate(c) && i + 1 < text.length() ? i + 2 : i + 1;
                        byte[] utf8 = text.substring(i, end).getBytes(StandardCharsets.UTF_8);
                        out.write(utf8, 0, utf8.length);
                        i = end - 1;
                    }
            }
        }
        out.write('"');
        return out.toByteArray();
    }

    private static void ascii(ByteArrayOutputStream out, String text) {
        byte[] bytes = text.getBytes(StandardCharsets.US_ASCII);
        out.write(bytes, 0, bytes.length);
    }

    private static byte[] concat(byte[]... parts) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (byte[] part : parts) {
            out.write(part, 0, part.length);
        }
        return out.toByteArray();
    }

    private static boolean regionEquals(byte[] record, int start, byte[] expected) {
        for (int i = 0; i < expected.length; i++) {
            if (record[start + i] != expected[i]) {
                return false;
            }
        }
        return true;
    }

    /** The top-level members of a record: their names, the last messageHeader and the last originalPayload. */
    private static final class Members {
        final Set<String> names = new HashSet<>();
        /** whether the last messageHeader member is an object */
        boolean header;
        int headerEnd;
        String errorCode;
        String code;
        String description;
        Wrapper wrapper;

        /** A wrapper's shape: exactly these two top-level members, the payload's an object. */
        boolean wrapped() {
            return names.size() == 2 && names.contains("messageHeader") && wrapper != null;
        }

        boolean read(JsonParser parser) throws IOException {
            if (parser.nextToken() != JsonToken.START_OBJECT) {
                return false;
            }
            while (parser.nextToken() == JsonToken.FIELD_NAME) {
                String name = parser.getCurrentName();
                names.add(name);
                JsonToken value = parser.nextToken();
                if ("messageHeader".equals(name)) {
                    header(parser, value);
                } else if ("originalPayload".equals(name)) {
                    wrapper = value == JsonToken.START_OBJECT ? Wrapper.read(parser) : null;
                    if (wrapper == null) {
                        parser.skipChildren();
                    }
                } else {
                    parser.skipChildren();
                }
            }
            return true;
        }

        private void header(JsonParser parser, JsonToken value) throws IOException {
            header = false;
            errorCode = null;
            code = null;
            description = null;
            if (value != JsonToken.START_OBJECT) {
                parser.skipChildren();
                return;
            }
            while (parser.nextToken() == JsonToken.FIELD_NAME) {
                String name = parser.getCurrentName();
                JsonToken member = parser.nextToken();
                if ("errorCode".equals(name)) {
                    code = member == JsonToken.VALUE_STRING ? parser.getText() : null;
                    errorCode = code != null ? code : text(parser, member);
                } else if ("errorDescription".equals(name)) {
                    description = member == JsonToken.VALUE_STRING ? parser.getText() : null;
                    parser.skipChildren();
                } else {
                    parser.skipChildren();
                }
            }
            header = true;
            // the END_OBJECT token starts at the closing brace: the object ends one byte later
            headerEnd = (int) parser.getTokenLocation().getByteOffset() + 1;
        }

        private static String text(JsonParser parser, JsonToken value) throws IOException {
            if (value == JsonToken.VALUE_NULL) {
                return null;
            }
            if (value.isScalarValue()) {
                return parser.getText();
            }
            parser.skipChildren();
            return null;
        }
    }

    /** The members of originalPayload the payload is recovered from (the last of each wins). */
    private static final class Wrapper {
        boolean encoded;
        String encoding;
        String data;
        String sha256;
        Long bytes;

        static Wrapper read(JsonParser parser) throws IOException {
            Wrapper wrapper = new Wrapper();
            while (parser.nextToken() == JsonToken.FIELD_NAME) {
                String name = parser.getCurrentName();
                JsonToken member = parser.nextToken();
                String text = member == JsonToken.VALUE_STRING ? parser.getText() : null;
                switch (name) {
                    case "encoding":
                        wrapper.encoded = true;
                        wrapper.encoding = text;
                        break;
                    case "data":
                        wrapper.data = text;
                        break;
                    case "sha256":
                        wrapper.sha256 = text;
                        break;
                    case "bytes":
                        wrapper.bytes = member == JsonToken.VALUE_NUMBER_INT ? parser.getLongValue() : null;
                        break;
                    default:
                        parser.skipChildren();
                }
            }
            return wrapper;
        }

        /** The payload a utf-8 or base64 wrapper carries; null when it carries none. */
        byte[] payload() {
            if (data == null) {
                return null;
            }
            if ("base64".equals(encoding)) {
                try {
                    return Base64.getMimeDecoder().decode(data);
                } catch (IllegalArgumentException notBase64) {
                    return null;
                }
            }
            return data.getBytes(StandardCharsets.UTF_8);
        }
    }
}
