"""Django's formats for this project (``FORMAT_MODULE_PATH``): dates and times as ``accounts.formats`` writes them."""
