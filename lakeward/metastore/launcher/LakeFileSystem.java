// The embedded lake's s3://<bucket>/<key> names, as the metastore nodes see them.
//
// The metastore keeps the names users and their tools know (s3://...), and checks,
// makes, moves and removes a table's folder, and lists its files for statistics, through
// Hadoop's FileSystem. When the lake is a local directory, this file system maps each
// name onto <lake dir>/<bucket>/<key>: going through the stack's S3 endpoint instead
// would make the metastore depend on the server, which starts after it and depends on it.
//
// Configured in hive-site.xml: fs.s3.impl and fs.s3a.impl name this class, and
// lakeward.lake.dir the lake's directory. A bucket is never made here: a name in a
// bucket the lake lacks is refused, as S3 refuses it.

import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.Comparator;
import java.util.stream.Stream;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

public final class LakeFileSystem extends FileSystem {
    static final String LAKE_DIR = "lakeward.lake.dir";
    private static final long BLOCK_SIZE = 32L * 1024 * 1024;

    private URI uri; // <scheme>://<bucket>
    private File bucketDir;
    private final RawLocalFileSystem local = new RawLocalFileSystem();

    @Override
    public void initialize(URI name, Configuration conf) throws IOException {
        super.initialize(name, conf);
        setConf(conf);
        String lakeDir = conf.get(LAKE_DIR);
        if (lakeDir == null) {
            throw new IOException(LAKE_DIR + " is not set: the lake's directory is unknown");
        }
        String bucket = name.getAuthority();
        if (bucket == null || bucket.isEmpty() || bucket.equals(".") || bucket.equals("..")
                || bucket.contains("/")) {
            throw new IOException(name + " names no bucket");
        }
        uri = URI.create(name.getScheme() + "://" + bucket);
        bucketDir = new File(lakeDir, bucket);
        local.initialize(URI.create("file:///"), conf);
    }

    @Override
    public String getScheme() {
        return uri == null ? "s3" : uri.getScheme();
    }

    @Override
    public URI getUri() {
        return uri;
    }

    /** The file a name in this bucket stands for. */
    private File file(Path path) throws IOException {
        String key = makeQualified(path).toUri().getPath();
        StringBuilder relative = new StringBuilder();
        for (String part : key.split("/")) {
            if (part.isEmpty()) {
                continue;
            }
            if (part.equals(".") || part.equals("..")) {
                throw new IOException(path + ": a place in the lake has no '.' or '..' folder");
            }
            relative.append('/').append(part);
        }
        if (!bucketDir.isDirectory()) {
            throw new FileNotFoundException(path + ": the lake has no bucket " + uri.getAuthority());
        }
        return relative.length() == 0 ? bucketDir : new File(bucketDir, relative.substring(1));
    }

    /** The name of a file in this bucket. */
    private Path name(File file) {
        String root = bucketDir.getAbsolutePath();
        String relative = file.getAbsolutePath().substring(root.length());
        return new Path(uri.getScheme(), uri.getAuthority(), relative.isEmpty() ? "/" : relative);
    }

    private FileStatus status(File file) {
        return new FileStatus(file.isDirectory() ? 0 : file.length(), file.isDirectory(), 1,
                BLOCK_SIZE, file.lastModified(), name(file));
    }

    private static Path localPath(File file) {
        return new Path(file.toURI());
    }

    @Override
    public FileStatus getFileStatus(Path path) throws IOException {
        File file = file(path);
        if (!file.exists()) {
            throw new FileNotFoundException(path + " does not exist");
        }
        return status(file);
    }

    @Override
    public FileStatus[] listStatus(Path path) throws IOException {
        File file = file(path);
        if (!file.exists()) {
            throw new FileNotFoundException(path + " does not exist");
        }
        if (!file.isDirectory()) {
            return new FileStatus[] {status(file)};
        }
        File[] children = file.listFiles();
        if (children == null) {
            throw new IOException(path + " cannot be listed");
        }
        FileStatus[] statuses = new FileStatus[children.length];
        for (int i = 0; i < children.length; i++) {
            statuses[i] = status(children[i]);
        }
        return statuses;
    }

    @Override
    public boolean mkdirs(Path path, FsPermission permission) throws IOException {
        File file = file(path);
        if (file.isFile()) {
            throw new IOException(path + " is an object, not a folder");
        }
        Files.createDirectories(file.toPath());
        return true;
    }

    @Override
    public boolean delete(Path path, boolean recursive) throws IOException {
        File file = file(path);
        if (!file.exists()) {
            return false;
        }
        if (file.isDirectory() && !recursive) {
            String[] children = file.list();
            if (children != null && children.length > 0) {
                throw new IOException(path + " is a folder that is not empty");
            }
        }
        try (Stream<java.nio.file.Path> walk = Files.walk(file.toPath())) {
            for (java.nio.file.Path each :
                    (Iterable<java.nio.file.Path>) walk.sorted(Comparator.reverseOrder())::iterator) {
                Files.delete(each);
            }
        }
        return true;
    }

    @Override
    public boolean rename(Path source, Path target) throws IOException {
        File from = file(source);
        File to = file(target);
        if (!from.exists() || to.exists()) {
            return false;
        }
        Files.createDirectories(to.getParentFile().toPath());
        Files.move(from.toPath(), to.toPath(), StandardCopyOption.ATOMIC_MOVE);
        return true;
    }

    @Override
    public FSDataInputStream open(Path path, int bufferSize) throws IOException {
        return local.open(localPath(file(path)), bufferSize);
    }

    @Override
    public FSDataOutputStream create(Path path, FsPermission permission, boolean overwrite,
            int bufferSize, short replication, long blockSize, Progressable progress)
            throws IOException {
        return local.create(localPath(file(path)), permission, overwrite, bufferSize,
                replication, blockSize, progress);
    }

    @Override
    public FSDataOutputStream append(Path path, int bufferSize, Progressable progress)
            throws IOException {
        throw new IOException(path + ": objects in the lake are not appended to");
    }

    @Override
    public void setWorkingDirectory(Path directory) {
        // Names in the lake are absolute: s3://<bucket>/<key>.
    }

    @Override
    public Path getWorkingDirectory() {
        return new Path(uri.getScheme(), uri.getAuthority(), "/");
    }
}
