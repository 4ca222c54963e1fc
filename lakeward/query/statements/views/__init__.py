"""Views' statements: CREATE [OR REPLACE] VIEW, DROP VIEW, SHOW VIEWS, SHOW CREATE VIEW
(``commands.py``), and the Spark SQL text stored beside a view's own (``spark.py``)."""
