// Releases the metastore locks of writers that died holding them.
//
// Iceberg's HiveCatalog takes a table lock around each commit and never
// heartbeats it; a writer killed inside its commit leaves the lock behind, and
// every later writer of the table waits on it. Hive 2.3 drops such locks only
// from its compactor's housekeeping, which needs the full transaction schema
// (and whose other work fails without it). This thread does only the lock part,
// as Hive's own sweep does it: locks outside transactions whose last heartbeat
// is older than hive.txn.timeout, timed by the database's clock (the one the
// heartbeats are written with).

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.TimeUnit;

import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.conf.HiveConf.ConfVars;

final class DeadLocks implements Runnable {
    private final HiveConf conf;
    private final long timeoutMillis;

    private DeadLocks(HiveConf conf) {
        this.conf = conf;
        this.timeoutMillis = conf.getTimeVar(ConfVars.HIVE_TXN_TIMEOUT, TimeUnit.MILLISECONDS);
    }

    static void startSweeping(HiveConf conf) {
        DeadLocks sweeper = new DeadLocks(conf);
        Thread thread = new Thread(sweeper, "lakeward-dead-locks");
        thread.setDaemon(true);
        thread.start();
    }

    @Override
    public void run() {
        long pause = Math.max(1000L, timeoutMillis / 6);
        while (true) {
            try {
                Thread.sleep(pause);
                sweep();
            } catch (InterruptedException e) {
                return;
            } catch (SQLException e) {
                // The database is away for now (a failover, a restart): try next time.
                System.err.println("dead-lock sweep failed: " + e.getMessage());
            }
        }
    }

    private void sweep() throws SQLException {
        String url = conf.getVar(ConfVars.METASTORECONNECTURLKEY);
        String user = conf.getVar(ConfVars.METASTORE_CONNECTION_USER_NAME);
        String password = conf.get(ConfVars.METASTOREPWD.varname, "");
        try (Connection connection = DriverManager.getConnection(url, user, password)) {
            long now = databaseTime(connection);
            try (PreparedStatement delete = connection.prepareStatement(
                    "DELETE FROM HIVE_LOCKS WHERE HL_TXNID = 0 AND HL_LAST_HEARTBEAT < ?")) {
                delete.setLong(1, now - timeoutMillis);
                int released = delete.executeUpdate();
                if (released > 0) {
                    System.err.println("released " + released + " lock(s) of dead writers");
                }
            }
        }
    }

    private static long databaseTime(Connection connection) throws SQLException {
        boolean derby = connection.getMetaData().getDatabaseProductName().startsWith("Apache Derby");
        String query = derby ? "VALUES CURRENT_TIMESTAMP" : "SELECT CURRENT_TIMESTAMP";
        try (Statement statement = connection.createStatement();
             ResultSet row = statement.executeQuery(query)) {
            row.next();
            return row.getTimestamp(1).getTime();
        }
    }
}
