// Prunes the notification log (NOTIFICATION_LOG) of changes older than the
// retention (lakeward.changes.retention, in seconds).
//
// ChangeLog writes an event for every change and nothing else removes them, so
// the table grows for as long as the metastore lives. Clients read the log only
// to forget what changed since their last look; one whose last look is older
// than the retention finds a gap in the event ids and forgets its whole cache,
// so pruning costs it a refill, never a stale answer. Every node prunes; the
// deletes are idempotent. Event times are the nodes' clocks, as ChangeLog
// writes them.

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;

import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.conf.HiveConf.ConfVars;

final class OldChanges implements Runnable {
    static final String RETENTION = "lakeward.changes.retention";
    private final HiveConf conf;
    private final long retentionSeconds;

    private OldChanges(HiveConf conf, long retentionSeconds) {
        this.conf = conf;
        this.retentionSeconds = retentionSeconds;
    }

    static void startPruning(HiveConf conf) {
        long retention = conf.getLong(RETENTION, 86400L);
        Thread thread = new Thread(new OldChanges(conf, retention), "lakeward-old-changes");
        thread.setDaemon(true);
        thread.start();
    }

    @Override
    public void run() {
        // A tenth of the retention between prunes, within a minute and an hour.
        long pause = Math.min(3600_000L, Math.max(1000L, retentionSeconds * 100L));
        while (true) {
            try {
                prune();
                Thread.sleep(pause);
            } catch (InterruptedException e) {
                return;
            } catch (SQLException e) {
                // The database is away for now (a failover, a restart): try next time.
                System.err.println("change log pruning failed: " + e.getMessage());
                try {
                    Thread.sleep(pause);
                } catch (InterruptedException stop) {
                    return;
                }
            }
        }
    }

    private void prune() throws SQLException {
        String url = conf.getVar(ConfVars.METASTORECONNECTURLKEY);
        String user = conf.getVar(ConfVars.METASTORE_CONNECTION_USER_NAME);
        String password = conf.get(ConfVars.METASTOREPWD.varname, "");
        try (Connection connection = DriverManager.getConnection(url, user, password)) {
            // The schema's names are upper case, quoted on PostgreSQL and MySQL.
            String q = connection.getMetaData().getIdentifierQuoteString().trim();
            long before = System.currentTimeMillis() / 1000 - retentionSeconds;
            try (PreparedStatement delete = connection.prepareStatement(
                    "DELETE FROM " + q + "NOTIFICATION_LOG" + q + " WHERE " + q + "EVENT_TIME"
                            + q + " < ?")) {
                delete.setLong(1, before);
                int pruned = delete.executeUpdate();
                if (pruned > 0) {
                    System.err.println("pruned " + pruned + " change log event(s)");
                }
            }
        }
    }
}
