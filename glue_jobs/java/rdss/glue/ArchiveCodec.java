package rdss.glue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import org.apache.hadoop.conf.Configurable;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.io.compress.CompressionCodec;
import org.apache.hadoop.io.compress.CompressionInputStream;
import org.apache.hadoop.io.compress.CompressionOutputStream;
import org.apache.hadoop.io.compress.Compressor;
import org.apache.hadoop.io.compress.Decompressor;

/**
 * The Hadoop codec the Glue jobs read archive objects ({@code .gz}) with, in place of Hadoop's
 * gzip codec, so that one damaged object no longer fails the whole run.
 *
 * <p>Hadoop's codec throws on an object that is truncated inside a gzip member, that has bytes
 * after its last member which are not gzip, or that is not gzip at all, and Spark then aborts the
 * job. This one reads an object as rdss/archive.py's reader does (every gzip member in turn; an
 * object that does not start with gzip's magic as it is; zero bytes after the last member as
 * padding) and, where that reader would fail, ends the object's lines with one line of its own:
 * the marker the job passes as {@link #MARKER_KEY} (a random token per run, which no archived
 * line can forge), a space, and what was wrong and where ({@link ArchiveObjectStream}). The job
 * takes those lines out of the records and reports each damaged object in one line.
 *
 * <p>The jobs name it per read ({@code io.compression.codecs}, with the marker beside it), so no
 * other read in the session is touched. Without a marker it fails on damage as Hadoop's does.
 * It only reads.
 */
public final class ArchiveCodec implements CompressionCodec, Configurable {
    /** The configuration key of the marker line's token (glue_jobs/runtime.py sets it). */
    public static final String MARKER_KEY = "rdss.archive.damage";

    private Configuration conf;

    @Override
    public void setConf(Configuration conf) {
        this.conf = conf;
    }

    @Override
    public Configuration getConf() {
        return conf;
    }

    @Override
    public CompressionInputStream createInputStream(InputStream in) throws IOException {
        return createInputStream(in, null);
    }

    @Override
    public CompressionInputStream createInputStream(InputStream in, Decompressor unused) throws IOException {
        String marker = conf == null ? null : conf.get(MARKER_KEY);
        return new ArchiveObjectStream(in, marker == null || marker.isEmpty() ? null : marker);
    }

    @Override
    public Class<? extends Decompressor> getDecompressorType() {
        return null; // nothing to pool: each stream has its own Inflater
    }

    @Override
    public Decompressor createDecompressor() {
        return null;
    }

    @Override
    public String getDefaultExtension() {
        return ".gz";
    }

    @Override
    public CompressionOutputStream createOutputStream(OutputStream out) {
        throw new UnsupportedOperationException("rdss.glue.ArchiveCodec only reads");
    }

    @Override
    public CompressionOutputStream createOutputStream(OutputStream out, Compressor compressor) {
        throw new UnsupportedOperationException("rdss.glue.ArchiveCodec only reads");
    }

    @Override
    public Class<? extends Compressor> getCompressorType() {
        return null;
    }

    @Override
    public Compressor createCompressor() {
        return null;
    }
}
