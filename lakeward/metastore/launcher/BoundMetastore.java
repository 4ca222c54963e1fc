// The Hive 2.3 metastore's Thrift service, listening on one address only.
//
// HiveMetaStore.main binds its server socket to every interface and has no
// setting to change that, while the Thrift port has no authentication. This
// launcher builds the same service from the public pieces of the bundled
// hive-metastore jar (the retrying HMSHandler, the IP-recording processor,
// a thread-pool Thrift server) but binds the socket to the address it is given.
//
// Usage: java -cp <conf dir>:<jars>:<this class> BoundMetastore BIND_ADDRESS PORT
// hive-site.xml is read from the classpath, as HiveMetaStore itself does.

import java.lang.reflect.Field;
import java.net.InetAddress;
import java.net.InetSocketAddress;

import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.conf.HiveConf.ConfVars;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.IHMSHandler;
import org.apache.hadoop.hive.metastore.TServerSocketKeepAlive;
import org.apache.hadoop.hive.metastore.TSetIpAddressProcessor;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.server.TServer;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;
import org.apache.thrift.transport.TTransportFactory;

public final class BoundMetastore {
    static final String EMPTY_PASSWORD = "lakeward.metastore.password.empty";

    private BoundMetastore() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: BoundMetastore BIND_ADDRESS PORT");
            System.exit(2);
        }
        InetSocketAddress address =
                new InetSocketAddress(InetAddress.getByName(args[0]), Integer.parseInt(args[1]));
        HiveConf.setLoadMetastoreConfig(true);
        HiveConf conf = new HiveConf(HiveMetaStore.HMSHandler.class);
        if (conf.getBoolean(EMPTY_PASSWORD, false)) {
            // An empty <value/> in hive-site.xml reads as unset, and Hive then
            // signs in with its default password; a database user without a
            // password needs the empty string set explicitly.
            conf.set(ConfVars.METASTOREPWD.varname, "");
        }
        markRemote();
        LockTables.ensure(conf);
        DeadLocks.startSweeping(conf);
        OldChanges.startPruning(conf);

        // Bind before connecting to the database: a taken port fails at once.
        TServerSocket socket = new TServerSocket(address);
        if (conf.getBoolVar(ConfVars.METASTORE_TCP_KEEP_ALIVE)) {
            socket = new TServerSocketKeepAlive(socket);
        }

        IHMSHandler base = new HiveMetaStore.HMSHandler("lakeward metastore node", conf, false);
        IHMSHandler handler = HiveMetaStore.newRetryingHMSHandler(base, conf);
        long maxMessage = conf.getLongVar(ConfVars.METASTORESERVERMAXMESSAGESIZE);
        TBinaryProtocol.Factory protocol =
                new TBinaryProtocol.Factory(true, true, maxMessage, maxMessage);
        TThreadPoolServer.Args serverArgs = new TThreadPoolServer.Args(socket)
                .processor(new TSetIpAddressProcessor<>(handler))
                .transportFactory(new TTransportFactory())
                .protocolFactory(protocol)
                .inputProtocolFactory(protocol)
                .minWorkerThreads(conf.getIntVar(ConfVars.METASTORESERVERMINTHREADS))
                .maxWorkerThreads(conf.getIntVar(ConfVars.METASTORESERVERMAXTHREADS));
        TServer server = new TThreadPoolServer(serverArgs);
        Runtime.getRuntime().addShutdownHook(new Thread(server::stop));
        System.out.println("metastore serving on " + address);
        server.serve();
    }

    // The handler asks HiveMetaStore whether it serves remote clients (to
    // record their address in the audit log); only main() sets that flag.
    private static void markRemote() throws ReflectiveOperationException {
        Field remote = HiveMetaStore.class.getDeclaredField("isMetaStoreRemote");
        remote.setAccessible(true);
        remote.setBoolean(null, true);
    }
}
