# The Scrapy peer of drover's benchmark (bench/scrapy.go writes this file
# out and runs it with Debian's /usr/bin/python3 and python3-scrapy).
# argv[1] is a JSON job: seeds, hostports (the in-scope "IP:PORT"s),
# settings. A minimal spider: every <a href> of a text response, joined,
# its #fragment cut, followed when its host:port is one of the web's.
# Scrapy's own dedup (request fingerprints), robots.txt middleware and
# scheduler do the rest. The last line on stdout is Scrapy's stats as JSON.
import json
import sys
from urllib.parse import urldefrag, urlsplit

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.http import TextResponse

job = json.loads(sys.argv[1])
allowed = set(job["hostports"])


class BenchSpider(scrapy.Spider):
    name = "bench"

    # Not start_urls: Scrapy sends those with dont_filter=True, so a seed
    # that a page links to again ("/") would be fetched twice.
    def start_requests(self):
        for url in job["seeds"]:
            yield scrapy.Request(url, callback=self.parse)

    def parse(self, response):
        if not isinstance(response, TextResponse):
            return
        for href in response.css("a::attr(href)").getall():
            url, _ = urldefrag(response.urljoin(href))
            if urlsplit(url).netloc in allowed:
                yield scrapy.Request(url, callback=self.parse)


process = CrawlerProcess(settings=job["settings"])
crawler = process.create_crawler(BenchSpider)
process.crawl(crawler)
process.start()
stats = {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in crawler.stats.get_stats().items()}
print(json.dumps(stats))
