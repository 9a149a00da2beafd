package rdss.glue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;
import org.apache.hadoop.io.compress.CompressionInputStream;

/**
 * The content of one archive object, for {@link ArchiveCodec}: every gzip member decompressed in
 * turn (RFC 1952: any header flags, each member's CRC-32 and length checked), or, for an object
 * that does not start with gzip's magic, its bytes as they are.
 *
 * <p>Where the object is damaged - it ends inside a member, a member's deflate data or checksum
 * is wrong, or bytes after the last member are neither gzip nor zero padding - the content ends
 * there with one line: the marker, a space and what happened, at which byte of the object. The
 * lines before it are handed on whole; the unfinished line the damage cut (part of a record, not
 * a record) is left out and its length said in that line. So every line handed on is one the
 * object really holds, and the run goes on with the next object.
 *
 * <p>Lines are held back until their newline arrives (a line of a damaged object must not be
 * handed on half), so one line at most is buffered, however long.
 */
final class ArchiveObjectStream extends CompressionInputStream {
    private static final int MAGIC_1 = 0x1f;
    private static final int MAGIC_2 = 0x8b;
    private static final int DEFLATE = 8;
    private static final int FHCRC = 0x02;
    private static final int FEXTRA = 0x04;
    private static final int FNAME = 0x08;
    private static final int FCOMMENT = 0x10;
    private static final int RESERVED = 0xe0;

    private enum State { START, MEMBER, BETWEEN, PLAIN, DONE }

    private final InputStream raw;
    private final String marker;
    private final Inflater inflater = new Inflater(true);
    private final CRC32 crc = new CRC32();
    private final byte[] input = new byte[64 * 1024];
    private int inputPos;
    private int inputEnd;
    /** Bytes of the object read from {@link #raw} so far (those still in {@link #input} included). */
    private long rawRead;
    private boolean rawEnded;

    /** Decoded content: [start, ready) may be handed on (whole lines), [ready, end) waits for its newline. */
    private byte[] buffer = new byte[256 * 1024];
    private int start;
    private int ready;
    private int end;
    private State state = State.START;
    private long memberBytes;

    ArchiveObjectStream(InputStream raw, String marker) throws IOException {
        super(raw);
        this.raw = raw;
        this.marker = marker;
    }

    @Override
    public int read() throws IOException {
        byte[] one = new byte[1];
        int n = read(one, 0, 1);
        return n == -1 ? -1 : one[0] & 0xff;
    }

    @Override
    public int read(byte[] target, int offset, int length) throws IOException {
        if (length == 0) {
            return 0;
        }
        while (start == ready) {
            if (state == State.DONE) {
                return -1;
            }
            decodeSome();
        }
        int n = Math.min(length, ready - start);
        System.arraycopy(buffer, start, target, offset, n);
        start += n;
        return n;
    }

    @Override
    public void resetState() {
        throw new UnsupportedOperationException("an archive object is read from its start only");
    }

    @Override
    public void close() throws IOException {
        inflater.end();
        super.close();
    }

    // -- decoding ---------------------------------------------------------------------------------

    /** Decode some more of the object into the buffer (or end it), moving {@link #ready} on. */
    private void decodeSome() throws IOException {
        if (start == ready && start > 0) { // what was handed on makes room for what waits
            System.arraycopy(buffer, start, buffer, 0, end - start);
            end -= start;
            ready -= start;
            start = 0;
        }
        if (end == buffer.length) {
            byte[] larger = new byte[buffer.length * 2];
            System.arraycopy(buffer, 0, larger, 0, end);
            buffer = larger;
        }
        int before = end;
        try {
            switch (state) {
                case START:
                    if (!available(1)) {
                        finish(); // an empty object: no lines
                    } else if (magicAhead()) {
                        header();
                    } else {
                        state = State.PLAIN; // not gzip: read as it is, as rdss/archive.py reads it
                    }
                    break;
                case PLAIN:
                    if (!available(1)) {
                        finish();
                        break;
                    }
                    int n = Math.min(inputEnd - inputPos, buffer.length - end);
                    System.arraycopy(input, inputPos, buffer, end, n);
                    inputPos += n;
                    end += n;
                    break;
                case MEMBER:
                    inflateSome();
                    break;
                case BETWEEN:
                    between();
                    break;
                default:
                    break;
            }
        } catch (Damage damage) {
            wholeLines(before); // what arrived before the damage was found
            damaged(damage.getMessage());
            return;
        }
        if (state != State.DONE) {
            wholeLines(before);
        }
    }

    /** Whole lines may be handed on: up to the last newline of what arrived from {@code from} on. */
    private void wholeLines(int from) {
        for (int i = end - 1; i >= from; i--) {
            if (buffer[i] == '\n') {
                ready = i + 1;
                return;
            }
        }
    }

    private void inflateSome() throws IOException, Damage {
        if (inflater.needsInput()) {
            if (!available(1)) {
                throw new Damage("the object ends inside a gzip member");
            }
            inflater.setInput(input, inputPos, inputEnd - inputPos);
            inputPos = inputEnd;
        }
        int n;
        try {
            n = inflater.inflate(buffer, end, buffer.length - end);
        } catch (DataFormatException error) {
            throw new Damage("a gzip member's data is corrupt (" + error.getMessage() + ")");
        }
        crc.update(buffer, end, n);
        end += n;
        memberBytes += n;
        if (inflater.finished()) {
            inputPos = inputEnd - inflater.getRemaining();
            long expectedCrc = readLittleEndian(4, "the object ends inside a gzip member's trailer");
            long expectedSize = readLittleEndian(4, "the object ends inside a gzip member's trailer");
            if (expectedCrc != crc.getValue() || expectedSize != (memberBytes & 0xffffffffL)) {
                throw new Damage("a gzip member's CRC-32 or length does not match its data");
            }
            state = State.BETWEEN;
        } else if (n == 0 && inflater.needsDictionary()) {
            throw new Damage("a gzip member needs a preset dictionary");
        }
    }

    private void between() throws IOException, Damage {
        if (!available(1)) {
            finish();
        } else if (magicAhead()) {
            header();
        } else if (input[inputPos] == 0) { // zero padding after the last member, as gzip allows
            while (available(1) && input[inputPos] == 0) {
                inputPos++;
            }
            if (available(1)) {
                throw new Damage("bytes after the zero padding that follows the last gzip member are not gzip");
            }
            finish();
        } else {
            throw new Damage("bytes after the last gzip member are not gzip");
        }
    }

    /** A member's header (RFC 1952 2.3), from its magic; then its deflate data. */
    private void header() throws IOException, Damage {
        String truncated = "the object ends inside a gzip header";
        inputPos += 2; // the magic, already seen
        int method = nextByte(truncated);
        int flags = nextByte(truncated);
        if (method != DEFLATE || (flags & RESERVED) != 0) {
            throw new Damage("a gzip header names an unknown method or flags");
        }
        skip(6, truncated); // mtime, extra flags, operating system
        if ((flags & FEXTRA) != 0) {
            skip((int) readLittleEndian(2, truncated), truncated);
        }
        if ((flags & FNAME) != 0) {
            while (nextByte(truncated) != 0) {
                // a zero-terminated file name
            }
        }
        if ((flags & FCOMMENT) != 0) {
            while (nextByte(truncated) != 0) {
                // a zero-terminated comment
            }
        }
        if ((flags & FHCRC) != 0) {
            skip(2, truncated);
        }
        inflater.reset();
        crc.reset();
        memberBytes = 0;
        state = State.MEMBER;
    }

    /** The content ends: what waits for a newline is the object's last line. */
    private void finish() {
        ready = end;
        state = State.DONE;
    }

    /** The content ends at damage: the unfinished line is left out, the marker line said. */
    private void damaged(String what) throws IOException {
        if (marker == null) { // not the jobs' read: fail as Hadoop's gzip codec does
            throw new IOException(what);
        }
        long at = rawRead - (inputEnd - inputPos);
        String line = marker + " " + what + " (byte " + at + " of the object)";
        if (end > ready) {
            line += "; an unfinished line of " + (end - ready) + " bytes before it is left out";
        }
        byte[] bytes = (line + "\n").getBytes(StandardCharsets.UTF_8);
        if (ready + bytes.length > buffer.length) {
            byte[] larger = new byte[ready + bytes.length];
            System.arraycopy(buffer, 0, larger, 0, ready);
            buffer = larger;
        }
        System.arraycopy(bytes, 0, buffer, ready, bytes.length);
        end = ready + bytes.length;
        ready = end;
        state = State.DONE;
    }

    // -- raw bytes --------------------------------------------------------------------------------

    /** Whether at least {@code count} (at most the input buffer's size) unread bytes are buffered, reading more as needed. */
    private boolean available(int count) throws IOException {
        while (inputEnd - inputPos < count && !rawEnded) {
            if (inputPos > 0) {
                System.arraycopy(input, inputPos, input, 0, inputEnd - inputPos);
                inputEnd -= inputPos;
                inputPos = 0;
            }
            int n = raw.read(input, inputEnd, input.length - inputEnd);
            if (n < 0) {
                rawEnded = true;
            } else {
                inputEnd += n;
                rawRead += n;
            }
        }
        return inputEnd - inputPos >= count;
    }

    private boolean magicAhead() throws IOException {
        return available(2) && (input[inputPos] & 0xff) == MAGIC_1 && (input[inputPos + 1] & 0xff) == MAGIC_2;
    }

    private int nextByte(String truncated) throws IOException, Damage {
        if (!available(1)) {
            throw new Damage(truncated);
        }
        return input[inputPos++] & 0xff;
    }

    private void skip(int count, String truncated) throws IOException, Damage {
        for (int i = 0; i < count; i++) {
            nextByte(truncated);
        }
    }

    private long readLittleEndian(int bytes, String truncated) throws IOException, Damage {
        long value = 0;
        for (int i = 0; i < bytes; i++) {
            value |= ((long) nextByte(truncated)) << (8 * i);
        }
        return value;
    }

    /** What ends an object early: its message says what and is the marker line's text. */
    private static final class Damage extends Exception {
        private static final long serialVersionUID = 1L;

        Damage(String what) {
            super(what);
        }
    }
}
