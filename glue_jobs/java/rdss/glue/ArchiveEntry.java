package rdss.glue;

import com.fasterxml.jackson.core.Base64Variants;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;

/**
 * One line of an archive object as the record it holds (rdss/archive.py is the format's
 * definition; this is its reader for the Glue jobs, which run without the rdss package).
 *
 * <p>Registered as a Spark SQL function over the line's bytes; returns the struct
 * audit_compaction.ENTRY_FIELDS declares: stream, shard, sequenceNumber, partitionKey, arrival
 * and the record's exact bytes. A line that starts {@code {"rdssArchive":} and is one entry of
 * version 1 - a JSON object of the known members only, the three identity members strings,
 * partitionKey and arrival strings or null, and exactly one of {@code text} (a string without
 * lone surrogates, whose UTF-8 encoding is the record) and {@code base64} (standard base64 of
 * the record) - is that entry. Any other line is a legacy record (an archive written before
 * entries, one raw record per line): its bytes are the record and its identity is null.
 *
 * <p>It never throws: whatever a line holds, the answer is a row.
 */
public final class ArchiveEntry implements UDF1<byte[], Row> {
    private static final long serialVersionUID = 1L;

    private static final byte[] PREFIX = "{\"rdssArchive\":".getBytes(StandardCharsets.US_ASCII);
    private static final int VERSION = 1;

    // The struct's fields, in order (audit_compaction.ENTRY_FIELDS declares their types).
    private static final int STREAM = 0;
    private static final int SHARD = 1;
    private static final int SEQUENCE_NUMBER = 2;
    private static final int PARTITION_KEY = 3;
    private static final int ARRIVAL = 4;
    private static final int PAYLOAD = 5;
    private static final int FIELD_COUNT = 6;

    private static final JsonFactory JSON = new JsonFactory();

    @Override
    public Row call(byte[] line) {
        Object[] row = new Object[FIELD_COUNT];
        if (line == null) {
            return RowFactory.create(row);
        }
        if (!startsWithPrefix(line) || !entry(line, row)) {
            row = new Object[FIELD_COUNT];
            row[PAYLOAD] = line;
        }
        return RowFactory.create(row);
    }

    private static boolean startsWithPrefix(byte[] line) {
        if (line.length < PREFIX.length) {
            return false;
        }
        for (int i = 0; i < PREFIX.length; i++) {
            if (line[i] != PREFIX[i]) {
                return false;
            }
        }
        return true;
    }

    /** Reads an entry into the row; false when the line is not one (then it is a legacy record). */
    private static boolean entry(byte[] line, Object[] row) {
        boolean version = false;
        boolean text = false;
        boolean encoded = false;
        try (JsonParser parser = JSON.createParser(line)) {
            if (parser.nextToken() != JsonToken.START_OBJECT) {
                return false;
            }
            while (parser.nextToken() == JsonToken.FIELD_NAME) {
                String name = parser.getCurrentName();
                JsonToken value = parser.nextToken();
                switch (name) {
                    case "rdssArchive":
                        version = value == JsonToken.VALUE_NUMBER_INT
                                && parser.getNumberType() == JsonParser.NumberType.INT
                                && parser.getIntValue() == VERSION;
                        if (!version) {
                            return false;
                        }
                        break;
                    case "stream":
                    case "shard":
                    case "sequenceNumber":
                        if (value != JsonToken.VALUE_STRING) {
                            return false;
                        }
                        row[identityField(name)] = parser.getText();
                        break;
                    case "partitionKey":
                    case "arrival":
                        if (value != JsonToken.VALUE_STRING && value != JsonToken.VALUE_NULL) {
                            return false;
                        }
                        row["arrival".equals(name) ? ARRIVAL : PARTITION_KEY] =
                                value == JsonToken.VALUE_NULL ? null : parser.getText();
                        break;
                    case "text":
                        if (value != JsonToken.VALUE_STRING) {
                            return false;
                        }
                        String payload = parser.getText();
                        if (hasLoneSurrogate(payload)) {
                            return false;
                        }
                        row[PAYLOAD] = payload.getBytes(StandardCharsets.UTF_8);
                        text = true;
                        break;
                    case "base64":
                        if (value != JsonToken.VALUE_STRING) {
                            return false;
                        }
                        row[PAYLOAD] = parser.getBinaryValue(Base64Variants.MIME_NO_LINEFEEDS);
                        encoded = true;
                        break;
                    default:
                        return false;
                }
            }
            if (parser.getCurrentToken() != JsonToken.END_OBJECT || parser.nextToken() != null) {
                return false;
            }
        } catch (IOException | RuntimeException notAnEntry) {
            return false;
        }
        return version
                && text != encoded
                && row[STREAM] != null
                && row[SHARD] != null
                && row[SEQUENCE_NUMBER] != null;
    }

    private static int identityField(String name) {
        switch (name) {
            case "stream":
                return STREAM;
            case "shard":
                return SHARD;
            default:
                return SEQUENCE_NUMBER;
        }
    }

    private static boolean hasLoneSurrogate(String text) {
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (Character.isHighSurrogate(c)) {
                if (i + 1 == text.length() || !Character.isLowSurrogate(text.charAt(i + 1))) {
                    return true;
                }
                i++;
            } else if (Character.isLowSurrogate(c)) {
                return true;
            }
        }
        return false;
    }
}
