package pybroker.compat.streams;

import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka's WordCountDemo topology, written out so pybroker's tests choose what the demo
 * hard-codes: the broker, the application id (a fresh one per test), the processing
 * guarantee and the state directory (a fresh one forces a restore from the changelog).
 *
 * The store is named "counts" so the internal topics Streams creates have names a test can
 * look for: APP-counts-repartition (from groupBy) and APP-counts-changelog (the store's).
 * The record cache is off and commits are frequent, so each count reaches the output topic
 * promptly and a test does not wait for Kafka's 30 s commit interval.
 *
 * Usage: WordCount BOOTSTRAP APP_ID INPUT OUTPUT GUARANTEE STATE_DIR [KEY=VALUE...]
 * (the KEY=VALUE pairs are more StreamsConfig properties, e.g. a shorter session timeout so a
 * killed instance leaves its group in seconds rather than Streams' 45).
 * Prints "STATE <new state>" on each state change; SIGTERM closes the application cleanly.
 */
public final class WordCount {
    public static void main(String[] args) throws InterruptedException {
        if (args.length < 6) {
            System.err.println(
                "usage: WordCount BOOTSTRAP APP_ID INPUT OUTPUT GUARANTEE STATE_DIR [KEY=VALUE...]");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[4]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        for (int i = 6; i < args.length; i++) {
            String[] pair = args[i].split("=", 2);
            props.put(pair[0], pair[1]);
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(args[2])
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word)
            .count(Materialized.as("counts"))
            .toStream()
            .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                closed.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            closed.countDown();
        }, "wordcount-shutdown"));
        streams.start();
        closed.await();
        streams.close();
    }
}
