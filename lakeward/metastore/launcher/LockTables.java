// The metastore's lock tables, created when missing before a node serves.
//
// Iceberg's HiveCatalog (Java's and pyiceberg's) commits a table by taking a
// metastore lock (the Thrift lock/check_lock/unlock calls), then swapping the
// table's metadata_location. Hive 2.3 keeps those locks in tables of its
// transaction schema, which DataNucleus' SchemaTool does not create (they are
// not JDO objects). Only the three the lock calls use are made here; the DDL is
// plain SQL that Derby, PostgreSQL and MySQL/MariaDB all read, unquoted as Hive's
// queries name the tables, and a new table is created and seeded in one
// transaction, so nodes starting together leave exactly one seed row.

import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.conf.HiveConf.ConfVars;

final class LockTables {
    private static final Map<String, String[]> TABLES = new LinkedHashMap<>();

    static {
        TABLES.put("HIVE_LOCKS", new String[] {
            "CREATE TABLE HIVE_LOCKS (HL_LOCK_EXT_ID bigint NOT NULL,"
                + " HL_LOCK_INT_ID bigint NOT NULL, HL_TXNID bigint, HL_DB varchar(128) NOT NULL,"
                + " HL_TABLE varchar(128), HL_PARTITION varchar(767),"
                + " HL_LOCK_STATE char(1) NOT NULL, HL_LOCK_TYPE char(1) NOT NULL,"
                + " HL_LAST_HEARTBEAT bigint NOT NULL, HL_ACQUIRED_AT bigint,"
                + " HL_USER varchar(128) NOT NULL, HL_HOST varchar(128) NOT NULL,"
                + " HL_HEARTBEAT_COUNT integer, HL_AGENT_INFO varchar(128),"
                + " HL_BLOCKEDBY_EXT_ID bigint, HL_BLOCKEDBY_INT_ID bigint,"
                + " PRIMARY KEY (HL_LOCK_EXT_ID, HL_LOCK_INT_ID))",
            "CREATE INDEX HL_TXNID_INDEX ON HIVE_LOCKS (HL_TXNID)",
        });
        TABLES.put("NEXT_LOCK_ID", new String[] {
            "CREATE TABLE NEXT_LOCK_ID (NL_NEXT bigint NOT NULL)",
            "INSERT INTO NEXT_LOCK_ID VALUES (1)",
        });
        TABLES.put("AUX_TABLE", new String[] {
            "CREATE TABLE AUX_TABLE (MT_KEY1 varchar(128) NOT NULL, MT_KEY2 bigint NOT NULL,"
                + " MT_COMMENT varchar(255), PRIMARY KEY (MT_KEY1, MT_KEY2))",
        });
    }

    private LockTables() {}

    static void ensure(HiveConf conf) throws SQLException {
        String url = conf.getVar(ConfVars.METASTORECONNECTURLKEY);
        String user = conf.getVar(ConfVars.METASTORE_CONNECTION_USER_NAME);
        String password = conf.get(ConfVars.METASTOREPWD.varname, "");
        try (Connection connection = DriverManager.getConnection(url, user, password)) {
            for (Map.Entry<String, String[]> table : TABLES.entrySet()) {
                if (!exists(connection, table.getKey())) {
                    create(connection, table.getKey(), table.getValue());
                }
            }
        }
    }

    private static void create(Connection connection, String name, String[] statements)
            throws SQLException {
        connection.setAutoCommit(false);
        try (Statement statement = connection.createStatement()) {
            for (String sql : statements) {
                statement.execute(sql);
            }
            connection.commit();
        } catch (SQLException e) {
            connection.rollback();
            if (!exists(connection, name)) {  // not a node that created it first
                throw e;
            }
        } finally {
            connection.setAutoCommit(true);
        }
    }

    private static boolean exists(Connection connection, String name) throws SQLException {
        DatabaseMetaData metadata = connection.getMetaData();
        // Unquoted names fold to upper case on Derby, to lower case on PostgreSQL.
        for (String spelling : new String[] {name, name.toLowerCase()}) {
            try (ResultSet found = metadata.getTables(null, null, spelling, null)) {
                if (found.next()) {
                    return true;
                }
            }
        }
        return false;
    }
}
