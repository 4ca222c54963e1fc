// A metastore event listener that records every change of a database, table
// or partition in the metastore's notification log (NOTIFICATION_LOG).
//
// Clients that cache metadata ask for the current notification event id (one
// cheap call) and read the events after the id they saw, so they forget
// exactly what changed, at once. Hive's own DbNotificationListener does the
// same but ships in a jar the pyspark wheel does not carry; this one records
// only what a cache needs: the event type, the database and the table.
//
// Configured as a transactional listener (hive.metastore.transactional.event.
// listeners): the event is written in the same database transaction as the
// change, so a client that sees the change also sees its event, and every
// metastore node over that database shares the log.

import java.lang.reflect.Field;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;

import javax.jdo.PersistenceManager;
import javax.jdo.datastore.JDOConnection;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.MetaStoreEventListener;
import org.apache.hadoop.hive.metastore.ObjectStore;
import org.apache.hadoop.hive.metastore.RawStore;
import org.apache.hadoop.hive.metastore.RawStoreProxy;
import org.apache.hadoop.hive.metastore.api.MetaException;
import org.apache.hadoop.hive.metastore.api.NotificationEvent;
import org.apache.hadoop.hive.metastore.api.Table;
import org.apache.hadoop.hive.metastore.events.AddPartitionEvent;
import org.apache.hadoop.hive.metastore.events.AlterPartitionEvent;
import org.apache.hadoop.hive.metastore.events.AlterTableEvent;
import org.apache.hadoop.hive.metastore.events.CreateDatabaseEvent;
import org.apache.hadoop.hive.metastore.events.CreateTableEvent;
import org.apache.hadoop.hive.metastore.events.DropDatabaseEvent;
import org.apache.hadoop.hive.metastore.events.DropPartitionEvent;
import org.apache.hadoop.hive.metastore.events.DropTableEvent;
import org.apache.hadoop.hive.metastore.events.ListenerEvent;

public final class ChangeLog extends MetaStoreEventListener {
    public ChangeLog(Configuration conf) {
        super(conf);
    }

    @Override
    public void onCreateDatabase(CreateDatabaseEvent event) throws MetaException {
        record(event, "CREATE_DATABASE", event.getDatabase().getName(), null);
    }

    @Override
    public void onDropDatabase(DropDatabaseEvent event) throws MetaException {
        record(event, "DROP_DATABASE", event.getDatabase().getName(), null);
    }

    @Override
    public void onCreateTable(CreateTableEvent event) throws MetaException {
        recordTable(event, "CREATE_TABLE", event.getTable());
    }

    @Override
    public void onDropTable(DropTableEvent event) throws MetaException {
        recordTable(event, "DROP_TABLE", event.getTable());
    }

    @Override
    public void onAlterTable(AlterTableEvent event) throws MetaException {
        Table before = event.getOldTable();
        Table after = event.getNewTable();
        recordTable(event, "ALTER_TABLE", before);
        // A rename changes two names: the old one is gone, the new one appears.
        if (!before.getDbName().equals(after.getDbName())
                || !before.getTableName().equals(after.getTableName())) {
            recordTable(event, "ALTER_TABLE", after);
        }
    }

    @Override
    public void onAddPartition(AddPartitionEvent event) throws MetaException {
        recordTable(event, "ADD_PARTITION", event.getTable());
    }

    @Override
    public void onDropPartition(DropPartitionEvent event) throws MetaException {
        recordTable(event, "DROP_PARTITION", event.getTable());
    }

    @Override
    public void onAlterPartition(AlterPartitionEvent event) throws MetaException {
        recordTable(event, "ALTER_PARTITION", event.getTable());
    }

    private void recordTable(ListenerEvent event, String type, Table table) throws MetaException {
        record(event, type, table.getDbName(), table.getTableName());
    }

    private void record(ListenerEvent event, String type, String database, String table)
            throws MetaException {
        if (!event.getStatus()) {
            return; // the change failed; nothing changed
        }
        int now = (int) (System.currentTimeMillis() / 1000);
        NotificationEvent entry = new NotificationEvent(0, now, type, "");
        entry.setDbName(database);
        if (table != null) {
            entry.setTableName(table);
        }
        // The RawStore of this thread: the one whose transaction holds the change.
        RawStore store = HiveMetaStore.HMSHandler.getMSForConf(getConf());
        lockSequence(store);
        store.addNotificationEvent(entry);
    }

    // Hive 2.3 reads the next event number and writes it back without a lock,
    // so two changes committed at once could share a number (and a client that
    // read the first would never see the second). Writing the counter's row
    // first, unchanged, locks it until the change's transaction commits:
    // concurrent changes take their numbers in turn, on every node.
    private static void lockSequence(RawStore store) throws MetaException {
        PersistenceManager manager = persistenceManager(store);
        if (manager == null) {
            return; // not Hive's ObjectStore: its own numbering applies
        }
        JDOConnection connection = manager.getDataStoreConnection();
        Connection jdbc = (Connection) connection.getNativeConnection();
        try (Statement statement = jdbc.createStatement()) {
            // The schema's names are upper case, quoted on PostgreSQL and MySQL.
            String q = jdbc.getMetaData().getIdentifierQuoteString().trim();
            String column = q + "NEXT_EVENT_ID" + q;
            statement.executeUpdate("UPDATE " + q + "NOTIFICATION_SEQUENCE" + q
                    + " SET " + column + " = " + column);
        } catch (SQLException e) {
            throw new MetaException("cannot lock the notification counter: " + e.getMessage());
        } finally {
            connection.close(); // hands the transaction's connection back; it stays open
        }
    }

    // The ObjectStore behind the handler's proxy holds the transaction's
    // PersistenceManager in a private field; neither is reachable otherwise.
    private static PersistenceManager persistenceManager(RawStore store) throws MetaException {
        try {
            Object base = store;
            if (Proxy.isProxyClass(base.getClass())) {
                InvocationHandler handler = Proxy.getInvocationHandler(base);
                if (!(handler instanceof RawStoreProxy)) {
                    return null;
                }
                base = field(RawStoreProxy.class, "base").get(handler);
            }
            if (!(base instanceof ObjectStore)) {
                return null;
            }
            return (PersistenceManager) field(ObjectStore.class, "pm").get(base);
        } catch (ReflectiveOperationException e) {
            throw new MetaException("cannot reach the metastore's transaction: " + e);
        }
    }

    private static Field field(Class<?> owner, String name) throws NoSuchFieldException {
        Field field = owner.getDeclaredField(name);
        field.setAccessible(true);
        return field;
    }
}
