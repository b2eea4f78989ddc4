// The compiler's cache of generated code: what a hit needs, and two compilations of one
// module sharing one executable.
#include <gtest/gtest.h>

#include "compiler/code_cache.h"
#include "compiler/compiler.h"
#include "test_util.h"

namespace fj {
namespace {

using testing::Parse;

std::shared_ptr<const Literal> Filled(int64_t n, float value) {
  auto lit = std::make_shared<Literal>(Shape(DType::kF32, {n}));
  for (int64_t i = 0; i < n; ++i) lit->SetDouble(i, value);
  return lit;
}

TEST(CodeCache, AHitNeedsTheKeyAndEqualLargeConstants) {
  CodeCache& cache = CodeCache::Get();
  cache.Clear();
  std::shared_ptr<const Literal> a = Filled(1000, 1.0f);
  cache.Insert("key", {nullptr, "ir", "", {a}});
  EXPECT_TRUE(cache.Find("key", {a}));
  EXPECT_TRUE(cache.Find("key", {Filled(1000, 1.0f)}));  // equal, another object
  // Same key, other contents (what a hash collision would give): a miss, not that code.
  EXPECT_FALSE(cache.Find("key", {Filled(1000, 2.0f)}));
  EXPECT_FALSE(cache.Find("key", {}));
  EXPECT_FALSE(cache.Find("other key", {a}));
  EXPECT_EQ(cache.Find("key", {a})->llvm_ir, "ir");
  cache.Clear();
  EXPECT_EQ(cache.size(), 0u);
}

TEST(CodeCache, KeepsTheMostRecentlyUsedEntries) {
  CodeCache& cache = CodeCache::Get();
  cache.Clear();
  for (size_t i = 0; i < CodeCache::kCapacity + 5; ++i) {
    cache.Insert("key " + std::to_string(i), {});
    EXPECT_TRUE(cache.Find("key 0", {}));  // used after every insertion: never the oldest
  }
  EXPECT_EQ(cache.size(), CodeCache::kCapacity);
  EXPECT_TRUE(cache.Find("key 0", {}));
  EXPECT_FALSE(cache.Find("key 1", {}));
  EXPECT_TRUE(cache.Find("key " + std::to_string(CodeCache::kCapacity + 4), {}));
  cache.Insert(std::string(CodeCache::kMaxKeyBytes + 1, 'k'), {});  // too long to keep
  EXPECT_FALSE(cache.Find(std::string(CodeCache::kMaxKeyBytes + 1, 'k'), {}));
  cache.Clear();
}

std::string ModuleWithConstant(float value) {
  std::string elements;
  for (int i = 0; i < 256; ++i) elements += (i ? ", " : "") + std::to_string(value);
  return "module m\n\nENTRY %main (x: f32[256]) -> (f32[256]) {\n  %x = f32[256] parameter(0)\n"
         "  %c = f32[256] constant({" + elements + "})\n  %y = f32[256] multiply(%x, %c)\n"
         "  ROOT %t = (f32[256]) tuple(%y)\n}\n";
}

TEST(CodeCache, CompilingAModuleAgainReusesItsExecutable) {
  CodeCache::Get().Clear();
  std::unique_ptr<Module> m = Parse(ModuleWithConstant(2.0f));
  std::unique_ptr<Compilation> first = Compile(*m, CompileOptions{});
  std::unique_ptr<Compilation> again = Compile(*Parse(ModuleWithConstant(2.0f)), CompileOptions{});
  EXPECT_FALSE(first->code_cache_hit);
  EXPECT_TRUE(again->code_cache_hit);
  EXPECT_EQ(again->executable, first->executable);
  // A constant of 1 KiB is named by its hash in the key, and compared on a hit.
  std::unique_ptr<Compilation> other = Compile(*Parse(ModuleWithConstant(3.0f)), CompileOptions{});
  EXPECT_FALSE(other->code_cache_hit);
  CompileOptions o0;
  o0.opt_level = 0;  // other code generation options: other code
  EXPECT_FALSE(Compile(*m, o0)->code_cache_hit);
  CodeCache::Get().Clear();
}

}  // namespace
}  // namespace fj
