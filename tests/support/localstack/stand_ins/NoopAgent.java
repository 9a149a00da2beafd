/**
 * Stand-in for LocalStack's DynamoDB Local agent (ddb-local-loader), which it downloads from
 * outside the package registries. The real agent patches DynamoDB Local to allow more than 20
 * global secondary indexes per table; the RDSS tables have none, so loading nothing is enough.
 */
public final class NoopAgent {
    private NoopAgent() {}

    public static void premain(String arguments, java.lang.instrument.Instrumentation instrumentation) {}
}
