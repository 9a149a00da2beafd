package rdss.glue;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;

/**
 * What the audit compaction needs of one archived line, in one pass of a streaming JSON parser.
 *
 * <p>Registered as a Spark SQL function over the line's bytes; returns the struct
 * audit_compaction.HEADER_FIELDS declares, its fields in the order of the constants below.
 * Spark's own {@code from_json} builds a character reader and a
 * generic converter for every row and re-serialises the body to measure it; this reads the
 * bytes once, keeps only the header members the curated table has, and counts the body's
 * compact serialisation without keeping it: on a two-core machine it takes the parse from
 * about two thirds of the job's task time to under a fifth.
 *
 * <p>The conversions are Spark's JSON reader's, so the curated rows are what {@code from_json}
 * with the same schema would give:
 *
 * <ul>
 *   <li>a text member that is not a JSON string is kept as its compact JSON text; null is null;
 *   <li>an integer member takes a JSON integer within 32 bits, anything else is null;
 *   <li>of repeated members the last wins, and a repeated object replaces the earlier one whole;
 *   <li>a line that is not valid UTF-8 is read as Spark reads it, each bad sequence replaced by
 *       U+FFFD;
 *   <li>bodyBytes is the UTF-8 length of a string body's text, or of any other body's compact
 *       serialisation.
 * </ul>
 *
 * <p>json says whether the line is exactly one JSON value, and messageId is null unless it is:
 * a line that breaks off after a complete header is a reject, not a message. The two timestamps are RFC 3339 date-times
 * (date, time and zone, ASCII digits) read to microseconds since the epoch, UTC, and null for
 * anything else, including a leap second and instants outside years 1 to 9999; publishedDay is
 * the UTC date of publishedTimestamp.
 *
 * <p>It never throws: whatever a line holds, the answer is a row.
 */
public final class AuditHeader implements UDF1<byte[], Row> {
    private static final long serialVersionUID = 1L;

    // The struct's fields, in order (audit_compaction.HEADER_FIELDS declares their types).
    private static final int MESSAGE_ID = 0;
    private static final int CORRELATION_ID = 1;
    private static final int MESSAGE_CLASS = 2;
    private static final int MESSAGE_TYPE = 3;
    private static final int SEQUENCE = 4;
    private static final int POSITION = 5;
    private static final int TOTAL = 6;
    private static final int PUBLISHED = 7;
    private static final int EXPIRATION = 8;
    private static final int PUBLISHED_DAY = 9;
    private static final int GENERATOR = 10;
    private static final int VERSION = 11;
    private static final int ERROR_CODE = 12;
    private static final int BODY_BYTES = 13;
    private static final int JSON_VALUE = 14;
    private static final int FIELD_COUNT = 15;

    /** The members read, by the field each goes to; the two timestamps hold their text until the end. */
    private static final Map<String, Integer> TIMINGS =
            Map.of("publishedTimestamp", PUBLISHED, "expirationTimestamp", EXPIRATION);
    private static final Map<String, Integer> SEQUENCE_MEMBERS =
            Map.of("sequence", SEQUENCE, "position", POSITION, "total", TOTAL);
    private static final Map<String, Integer> HEADER = Map.of(
            "messageId", MESSAGE_ID,
            "correlationId", CORRELATION_ID,
            "messageClass", MESSAGE_CLASS,
            "messageType", MESSAGE_TYPE,
            "generator", GENERATOR,
            "version", VERSION,
            "errorCode", ERROR_CODE);
    /** The header's members that are objects themselves. */
    private static final Map<String, Map<String, Integer>> HEADER_OBJECTS =
            Map.of("messageTimings", TIMINGS, "messageSequence", SEQUENCE_MEMBERS);

    private static final JsonFactory JSON = new JsonFactory();

    @Override
    public Row call(byte[] line) {
        Object[] row = new Object[FIELD_COUNT];
        if (line == null) {
            return RowFactory.create(row);
        }
        boolean whole;
        try (JsonParser parser = ascii(line) ? JSON.createParser(line) : JSON.createParser(utf8(line))) {
            whole = record(parser, row) && parser.nextToken() == null;
        } catch (IOException | RuntimeException notJson) {
            whole = false;
        }
        if (!whole) {
            row[MESSAGE_ID] = null;
        }
        row[JSON_VALUE] = whole;
        Long published = Rfc3339.micros((String) row[PUBLISHED]);
        row[PUBLISHED] = published;
        row[EXPIRATION] = Rfc3339.micros((String) row[EXPIRATION]);
        row[PUBLISHED_DAY] = published == null ? null : Rfc3339.day(published);
        return RowFactory.create(row);
    }

    /** Reads the top-level value; false if there was none. */
    private static boolean record(JsonParser parser, Object[] row) throws IOException {
        JsonToken token = parser.nextToken();
        if (token == null) {
            return false;
        }
        if (token != JsonToken.START_OBJECT) {
            parser.skipChildren();
            return true;
        }
        while (parser.nextToken() == JsonToken.FIELD_NAME) {
            String name = parser.getCurrentName();
            JsonToken value = parser.nextToken();
            if ("messageHeader".equals(name)) {
                members(parser, value, row, HEADER, HEADER_OBJECTS);
            } else if ("messageBody".equals(name)) {
                row[BODY_BYTES] = bodyBytes(parser, value);
            } else {
                parser.skipChildren();
            }
        }
        return true;
    }

    /**
     * Reads an object's listed members into their fields, and its listed object members
     * likewise; anything else is skipped. The fields are cleared first, so that a repeated
     * member replaces the earlier one whole, and a value that is not an object leaves them null.
     */
    private static void members(
            JsonParser parser,
            JsonToken value,
            Object[] row,
            Map<String, Integer> fields,
            Map<String, Map<String, Integer>> objects)
            throws IOException {
        clear(row, fields);
        for (Map<String, Integer> inner : objects.values()) {
            clear(row, inner);
        }
        if (value != JsonToken.START_OBJECT) {
            parser.skipChildren();
            return;
        }
        while (parser.nextToken() == JsonToken.FIELD_NAME) {
            String name = parser.getCurrentName();
            JsonToken member = parser.nextToken();
            Integer field = fields.get(name);
            Map<String, Integer> inner = objects.get(name);
            if (field != null) {
                row[field] = field == POSITION || field == TOTAL ? int32(parser, member) : text(parser, member);
            } else if (inner != null) {
                members(parser, member, row, inner, Map.of());
            } else {
                parser.skipChildren();
            }
        }
    }

    private static void clear(Object[] row, Map<String, Integer> fields) {
        for (int field : fields.values()) {
            row[field] = null;
        }
    }

    /** A member read into a string column: a string's text, null, or any other value's compact JSON. */
    private static String text(JsonParser parser, JsonToken value) throws IOException {
        if (value == JsonToken.VALUE_STRING) {
            return parser.getText();
        }
        if (value == JsonToken.VALUE_NULL) {
            return null;
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream(32);
        try (JsonGenerator generator = JSON.createGenerator(out)) {
            generator.copyCurrentStructure(parser);
        }
        return new String(out.toByteArray(), StandardCharsets.UTF_8);
    }

    private static Integer int32(JsonParser parser, JsonToken value) throws IOException {
        if (value == JsonToken.VALUE_NUMBER_INT && parser.getNumberType() == JsonParser.NumberType.INT) {
            return parser.getIntValue();
        }
        parser.skipChildren();
        return null;
    }

    private static Long bodyBytes(JsonParser parser, JsonToken value) throws IOException {
        if (value == JsonToken.VALUE_NULL) {
            return null;
        }
        if (value == JsonToken.VALUE_STRING) {
            return utf8Length(parser.getTextCharacters(), parser.getTextOffset(), parser.getTextLength());
        }
        return compactLength(parser, value);
    }

    /**
     * The bytes Jackson's UTF-8 generator would write copying this value compactly
     * ({@code copyCurrentStructure}, which is how Spark's reader turns a value into a string
     * column), counted as the value is read instead of written out.
     */
    static long compactLength(JsonParser parser, JsonToken value) throws IOException {
        long bytes = 0;
        int depth = 0;
        // per open container: whether it is an array, and whether its next element needs a comma
        boolean[] array = new boolean[8];
        boolean[] following = new boolean[8];
        JsonToken token = value;
        while (true) {
            switch (token) {
                case START_OBJECT:
                case START_ARRAY:
                    if (depth > 0 && array[depth]) {
                        bytes += comma(following, depth);
                    }
                    bytes += 1;
                    depth++;
                    if (depth == array.length) {
                        array = java.util.Arrays.copyOf(array, depth * 2);
                        following = java.util.Arrays.copyOf(following, depth * 2);
                    }
                    array[depth] = token == JsonToken.START_ARRAY;
                    following[depth] = false;
                    break;
                case END_OBJECT:
                case END_ARRAY:
                    bytes += 1;
                    depth--;
                    break;
                case FIELD_NAME:
                    bytes += comma(following, depth) + quotedLength(parser) + 1;
                    break;
                default:
                    if (depth > 0 && array[depth]) {
                        bytes += comma(following, depth);
                    }
                    bytes += scalarLength(parser, token);
            }
            if (depth == 0) {
                return bytes;
            }
            token = parser.nextToken();
            if (token == null) {
                throw new IOException("input ended inside a value");
            }
        }
    }

    private static long scalarLength(JsonParser parser, JsonToken token) throws IOException {
        switch (token) {
            case VALUE_STRING:
                return quotedLength(parser);
            case VALUE_NUMBER_INT:
                return parser.getNumberValue().toString().length();
            case VALUE_NUMBER_FLOAT:
                return floatLength(parser);
            case VALUE_TRUE:
            case VALUE_NULL:
                return 4;
            case VALUE_FALSE:
                return 5;
            default:
                // VALUE_EMBEDDED_OBJECT and NOT_AVAILABLE never come from a text parser
                throw new IOException("unexpected token " + token);
        }
    }

    private static int comma(boolean[] following, int depth) {
        if (following[depth]) {
            return 1;
        }
        following[depth] = true;
        return 0;
    }

    /** A double as Jackson writes it: Double.toString, or a quoted name for NaN and the infinities. */
    private static int floatLength(JsonParser parser) throws IOException {
        double number = parser.getDoubleValue();
        if (Double.isNaN(number) || Double.isInfinite(number)) {
            return Double.toString(number).length() + 2;
        }
        return Double.toString(number).length();
    }

    /**
     * A string or name as Jackson's UTF-8 generator escapes and quotes it: quote, backslash and
     * control characters escaped, characters outside the Basic Multilingual Plane as two
     * escapes, everything else as UTF-8.
     */
    private static long quotedLength(JsonParser parser) throws IOException {
        char[] chars = parser.getTextCharacters();
        int offset = parser.getTextOffset();
        int end = offset + parser.getTextLength();
        long bytes = 2;
        for (int i = offset; i < end; i++) {
            char c = chars[i];
            if (c >= 0x20 && c < 0x80) {
                bytes += (c == '"' || c == '\\') ? 2 : 1;
            } else if (c < 0x20) {
                bytes += (c == '\b' || c == '\t' || c == '\n' || c == '\f' || c == '\r') ? 2 : 6;
            } else if (c < 0x800) {
                bytes += 2;
            } else if (Character.isSurrogate(c)) {
                // Jackson writes each half of a pair (or a lone half) as a \\uXXXX escape
                bytes += 6;
            } else {
                bytes += 3;
            }
        }
        return bytes;
    }

    /** The length of these characters in UTF-8 as Java encodes them (a lone surrogate as '?'). */
    static long utf8Length(char[] chars, int offset, int length) {
        long bytes = 0;
        int end = offset + length;
        for (int i = offset; i < end; i++) {
            char c = chars[i];
            if (c < 0x80) {
                bytes += 1;
            } else if (c < 0x800) {
                bytes += 2;
            } else if (Character.isHighSurrogate(c) && i + 1 < end && Character.isLowSurrogate(chars[i + 1])) {
                bytes += 4;
                i++;
            } else if (Character.isSurrogate(c)) {
                bytes += 1;
            } else {
                bytes += 3;
            }
        }
        return bytes;
    }

    private static boolean ascii(byte[] line) {
        for (byte b : line) {
            if (b < 0) {
                return false;
            }
        }
        return true;
    }

    /** The line as Spark's JSON reader decodes it: malformed UTF-8 replaced, never an error. */
    private static String utf8(byte[] line) {
        return new String(line, StandardCharsets.UTF_8);
    }
}
