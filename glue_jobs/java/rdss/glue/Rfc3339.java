package rdss.glue;

import java.time.DateTimeException;
import java.time.LocalDate;

/**
 * RFC 3339 date-times (``2026-11-05T16:53:45.600Z``, ``...+01:00``) to microseconds since the
 * epoch, by hand: a formatter or a regular expression per timestamp costs more than the rest of
 * a line's parse.
 *
 * <p>Accepted: {@code YYYY-MM-DD}, {@code T} or {@code t}, {@code hh:mm:ss}, an optional fraction
 * of any length (truncated to microseconds), then {@code Z}, {@code z} or {@code +hh:mm} /
 * {@code -hh:mm}, with ASCII digits only and nothing after. Refused (null): anything else, a
 * date or time that does not exist (February 30th, hour 24, the leap second :60), an offset of
 * a day or more, and instants outside years 1 to 9999 once in UTC. This is the same rule as
 * the single-process comparison in rdss.bench.glue.
 */
public final class Rfc3339 {
    private static final long MICROS_PER_SECOND = 1_000_000L;
    private static final long MICROS_PER_DAY = 86_400L * MICROS_PER_SECOND;
    /** 0001-01-01T00:00:00Z and the first instant after 9999-12-31T23:59:59.999999Z. */
    private static final long MIN = -62_135_596_800L * MICROS_PER_SECOND;
    private static final long END = 253_402_300_800L * MICROS_PER_SECOND;

    private Rfc3339() {}

    public static Long micros(String text) {
        if (text == null || text.length() < 20) {
            return null;
        }
        int year = digits(text, 0, 4);
        int month = digits(text, 5, 2);
        int day = digits(text, 8, 2);
        int hour = digits(text, 11, 2);
        int minute = digits(text, 14, 2);
        int second = digits(text, 17, 2);
        char t = text.charAt(10);
        if (year < 0 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0
                || text.charAt(4) != '-' || text.charAt(7) != '-' || (t != 'T' && t != 't')
                || text.charAt(13) != ':' || text.charAt(16) != ':') {
            return null;
        }
        int i = 19;
        int n = text.length();
        long fraction = 0;
        if (i < n && text.charAt(i) == '.') {
            int first = ++i;
            while (i < n && isDigit(text.charAt(i))) {
                if (i - first < 6) {
                    fraction = fraction * 10 + (text.charAt(i) - '0');
                }
                i++;
            }
            if (i == first) {
                return null;
            }
            for (int kept = Math.min(i - first, 6); kept < 6; kept++) {
                fraction *= 10;
            }
        }
        if (i >= n) {
            return null;
        }
        long offsetMinutes;
        char zone = text.charAt(i);
        if ((zone == 'Z' || zone == 'z') && i + 1 == n) {
            offsetMinutes = 0;
        } else if ((zone == '+' || zone == '-') && i + 6 == n && text.charAt(i + 3) == ':') {
            int hours = digits(text, i + 1, 2);
            int minutes = digits(text, i + 4, 2);
            if (hours < 0 || minutes < 0 || hours * 60 + minutes >= 24 * 60) {
                return null;
            }
            offsetMinutes = (zone == '-' ? -1 : 1) * (hours * 60L + minutes);
        } else {
            return null;
        }
        if (year < 1 || hour > 23 || minute > 59 || second > 59) {
            return null;  // java.time has a year 0; RFC 3339 and Python do not
        }
        long epochDay;
        try {
            epochDay = LocalDate.of(year, month, day).toEpochDay();
        } catch (DateTimeException noSuchDate) {
            return null;
        }
        long seconds = epochDay * 86_400L + hour * 3_600L + minute * 60L + second - offsetMinutes * 60L;
        long micros = seconds * MICROS_PER_SECOND + fraction;
        return micros < MIN || micros >= END ? null : micros;
    }

    /** The UTC date of an instant as {@code yyyy-MM-dd} (years 1 to 9999, as {@link #micros} gives). */
    public static String day(long micros) {
        return LocalDate.ofEpochDay(Math.floorDiv(micros, MICROS_PER_DAY)).toString();
    }

    private static int digits(String text, int at, int count) {
        int value = 0;
        for (int i = at; i < at + count; i++) {
            char c = text.charAt(i);
            if (!isDigit(c)) {
                return -1;
            }
            value = value * 10 + (c - '0');
        }
        return value;
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }
}
